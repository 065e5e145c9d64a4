"""
Title: Deep Q-Learning for Atari Breakout
(The shape of keras-io's examples/rl/deep_q_network_breakout.py as its Keras 3 version stands: the
epsilon-greedy loop at module level, the actor acting with an eager ``model(state_tensor,
training=False)``, ``model_target.predict(state_next_sample)`` and an eager GradientTape every fourth
frame, ``model_target.set_weights(model.get_weights())`` every ``update_target_network`` frames.
gymnasium's Atari is not installed here: a small stand-in game gives the 4 stacked 84x84 frames
AtariPreprocessing + FrameStack give, and the frame counts are scaled down to a CPU-sized run.)
"""

"""
## Setup
"""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
from keras import layers

import numpy as np
import tensorflow as tf


class Breakout:
    """Stand-in for ``FrameStack(AtariPreprocessing(gym.make("BreakoutNoFrameskip-v4")), 4)``: four
    stacked 84x84 uint8 frames of a ball and a paddle, 4 actions (noop, fire, right, left), a reward
    for each ball returned (a ball missed bounces back with none), the episode over after 150 frames."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def _frame(self):
        f = np.zeros((84, 84), np.uint8)
        f[78:80, max(0, self.paddle - 8) : self.paddle + 8] = 255
        y, x = int(self.ball[0]), int(self.ball[1])
        f[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2] = 255
        f[4:10, :] = 128  # the bricks
        return f

    def reset(self):
        self.t, self.paddle = 0, 42
        self.ball = np.array([12.0, float(self.rng.integers(10, 74))])
        self.v = np.array([2.0, self.rng.choice([-2.0, 2.0])])
        self.frames = [self._frame()] * 4
        return np.stack(self.frames), {}

    def step(self, action):
        self.t += 1
        self.paddle = int(np.clip(self.paddle + {0: 0, 1: 0, 2: 3, 3: -3}[int(action)], 8, 76))
        self.ball += self.v
        reward, done = 0.0, self.t >= 150
        if not 1 <= self.ball[1] <= 82:
            self.v[1] = -self.v[1]
        if self.ball[0] <= 10:
            self.v[0] = -self.v[0]
        if self.ball[0] >= 77:
            self.v[0] = -self.v[0]
            reward = 1.0 if abs(self.ball[1] - self.paddle) <= 9 else 0.0
        self.ball = np.clip(self.ball, 1, 82)
        self.frames = self.frames[1:] + [self._frame()]
        return np.stack(self.frames), reward, done, False, {}


# Configuration paramaters for the whole setup
seed = 42
gamma = 0.99  # Discount factor for past rewards
epsilon = 1.0  # Epsilon greedy parameter
epsilon_min = 0.1  # Minimum epsilon greedy parameter
epsilon_max = 1.0  # Maximum epsilon greedy parameter
epsilon_interval = (
    epsilon_max - epsilon_min
)  # Rate at which to reduce chance of random action being taken
batch_size = 32  # Size of batch taken from replay buffer
max_steps_per_episode = 10000
max_episodes = 4  # Limit training episodes, will run until solved if smaller than 1

env = Breakout(seed)
keras.utils.set_random_seed(seed)

"""
## Implement the Deep Q-Network
"""

num_actions = 4


def create_q_model():
    # Network defined by the Deepmind paper
    return keras.Sequential(
        [
            layers.Lambda(
                lambda tensor: keras.ops.transpose(tensor, [0, 2, 3, 1]),
                output_shape=(84, 84, 4),
                input_shape=(4, 84, 84),
            ),
            # Convolutions on the frames on the screen
            layers.Conv2D(32, 8, strides=4, activation="relu", input_shape=(4, 84, 84)),
            layers.Conv2D(64, 4, strides=2, activation="relu"),
            layers.Conv2D(64, 3, strides=1, activation="relu"),
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dense(num_actions, activation="linear"),
        ]
    )


# The first model makes the predictions for Q-values which are used to
# make a action.
model = create_q_model()
# Build a target model for the prediction of future rewards.
model_target = create_q_model()


"""
## Train
"""
# In the Deepmind paper they use RMSProp however then Adam optimizer
# improves training time
optimizer = keras.optimizers.Adam(learning_rate=0.00025, clipnorm=1.0)

# Experience replay buffers
action_history = []
state_history = []
state_next_history = []
rewards_history = []
done_history = []
episode_reward_history = []
running_reward = 0
episode_count = 0
frame_count = 0
# Number of frames to take random action and observe output (50000 in the example)
epsilon_random_frames = 100
# Number of frames for exploration
epsilon_greedy_frames = 1000000.0
# Maximum replay length
max_memory_length = 100000
# Train the model after 4 actions
update_after_actions = 4
# How often to update the target network (10000 in the example)
update_target_network = 200
# Using huber loss for stability
loss_function = keras.losses.Huber()

while True:
    observation, _ = env.reset()
    state = np.array(observation)
    episode_reward = 0

    for timestep in range(1, max_steps_per_episode):
        frame_count += 1

        # Use epsilon-greedy for exploration
        if frame_count < epsilon_random_frames or epsilon > np.random.rand(1)[0]:
            # Take random action
            action = np.random.choice(num_actions)
        else:
            # Predict action Q-values
            # From environment state
            state_tensor = keras.ops.convert_to_tensor(state)
            state_tensor = keras.ops.expand_dims(state_tensor, 0)
            action_probs = model(state_tensor, training=False)
            # Take best action
            action = keras.ops.argmax(action_probs[0]).numpy()

        # Decay probability of taking random action
        epsilon -= epsilon_interval / epsilon_greedy_frames
        epsilon = max(epsilon, epsilon_min)

        # Apply the sampled action in our environment
        state_next, reward, done, _, _ = env.step(action)
        state_next = np.array(state_next)

        episode_reward += reward

        # Save actions and states in replay buffer
        action_history.append(action)
        state_history.append(state)
        state_next_history.append(state_next)
        done_history.append(done)
        rewards_history.append(reward)
        state = state_next

        # Update every fourth frame and once batch size is over 32
        if frame_count % update_after_actions == 0 and len(done_history) > batch_size:
            # Get indices of samples for replay buffers
            indices = np.random.choice(range(len(done_history)), size=batch_size)

            # Using list comprehension to sample from replay buffer
            state_sample = np.array([state_history[i] for i in indices])
            state_next_sample = np.array([state_next_history[i] for i in indices])
            rewards_sample = [rewards_history[i] for i in indices]
            action_sample = [action_history[i] for i in indices]
            done_sample = keras.ops.convert_to_tensor(
                [float(done_history[i]) for i in indices]
            )

            # Build the updated Q-values for the sampled future states
            # Use the target model for stability
            future_rewards = model_target.predict(state_next_sample)
            # Q value = reward + discount factor * expected future reward
            updated_q_values = rewards_sample + gamma * keras.ops.amax(
                future_rewards, axis=1
            )

            # If final frame set the last value to -1
            updated_q_values = updated_q_values * (1 - done_sample) - done_sample

            # Create a mask so we only calculate loss on the updated Q-values
            masks = keras.ops.one_hot(action_sample, num_actions)

            with tf.GradientTape() as tape:
                # Train the model on the states and updated Q-values
                q_values = model(state_sample)

                # Apply the masks to the Q-values to get the Q-value for action taken
                q_action = keras.ops.sum(keras.ops.multiply(q_values, masks), axis=1)
                # Calculate loss between new Q-value and old Q-value
                loss = loss_function(updated_q_values, q_action)

            # Backpropagation
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        if frame_count % update_target_network == 0:
            # update the the target network with new weights
            model_target.set_weights(model.get_weights())
            # Log details
            template = "running reward: {:.2f} at episode {}, frame count {}"
            print(template.format(running_reward, episode_count, frame_count))

        # Limit the state and reward history
        if len(rewards_history) > max_memory_length:
            del rewards_history[:1]
            del state_history[:1]
            del state_next_history[:1]
            del action_history[:1]
            del done_history[:1]

        if done:
            break

    # Update running reward to check condition for solving
    episode_reward_history.append(episode_reward)
    if len(episode_reward_history) > 100:
        del episode_reward_history[:1]
    running_reward = np.mean(episode_reward_history)

    episode_count += 1

    if running_reward > 40:  # Condition to consider the task solved
        print("Solved at episode {}!".format(episode_count))
        break

    if (
        max_episodes > 0 and episode_count >= max_episodes
    ):  # Maximum number of episodes reached
        print("Stopped at episode {}!".format(episode_count))
        break
