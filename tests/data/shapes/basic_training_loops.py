"""The shape of TensorFlow's "Basic training loops" guide (and of physics-informed networks): a full-batch
loop over epochs that fetches nothing. The model is a ``tf.Module`` of two ``tf.Variable``s, the update
is ``assign_sub`` after the tape, and each epoch the loop evaluates the loss again and reads the weights
with ``.numpy()``. Between the tape and the next one lies the loop's own work, not a wait for data.
(sample_traces/full-batch-loop holds its trace.)
"""

import tensorflow as tf

TRUE_W = 3.0
TRUE_B = 2.0
NUM_EXAMPLES = 201

x = tf.cast(tf.linspace(-2, 2, NUM_EXAMPLES), tf.float32)
y = x * TRUE_W + TRUE_B + tf.random.normal(shape=[NUM_EXAMPLES], seed=0)


class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


def loss(target_y, predicted_y):
    return tf.reduce_mean(tf.square(target_y - predicted_y))


def train(model, x, y, learning_rate):
    with tf.GradientTape() as t:
        current_loss = loss(y, model(x))
    dw, db = t.gradient(current_loss, [model.w, model.b])
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


model = MyModel()
weights, biases = [], []
for epoch in range(300):
    train(model, x, y, learning_rate=0.1)
    weights.append(model.w.numpy())
    biases.append(model.b.numpy())
    current_loss = loss(y, model(x))
    if epoch % 100 == 0:
        print(f"Epoch {epoch:2d}: W = {weights[-1]:1.2f}, b = {biases[-1]:1.2f}, loss={current_loss:2.5f}")
