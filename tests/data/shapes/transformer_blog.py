"""Shape of a blog's Transformer training loop (from tensorflow import function, GradientTape)."""
from time import time

import numpy as np
from keras import Model, layers
from keras.losses import sparse_categorical_crossentropy
from keras.metrics import Mean
from keras.optimizers import Adam
from keras.optimizers.schedules import LearningRateSchedule
from tensorflow import GradientTape, argmax, cast, equal, float32, function, math, reduce_sum
from tensorflow import data, int64

# Define the model parameters
h = 4
d_k = 32
d_model = 128
d_ff = 256
n = 2
enc_seq_length = 24
dec_seq_length = 24
vocab = 500

# Define the training parameters
epochs = 2
batch_size = 64
beta_1 = 0.9
beta_2 = 0.98
epsilon = 1e-9


class LRScheduler(LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000, **kwargs):
        super().__init__(**kwargs)
        self.d_model = cast(d_model, float32)
        self.warmup_steps = warmup_steps

    def __call__(self, step_num):
        step_num = cast(step_num, float32)
        arg1 = step_num ** -0.5
        arg2 = step_num * (self.warmup_steps ** -1.5)
        return (self.d_model ** -0.5) * math.minimum(arg1, arg2)


optimizer = Adam(LRScheduler(d_model), beta_1, beta_2, epsilon)

rng = np.random.default_rng(0)
trainX = rng.integers(1, vocab, (4096, enc_seq_length)).astype("int64")
trainY = rng.integers(1, vocab, (4096, dec_seq_length + 1)).astype("int64")
train_dataset = data.Dataset.from_tensor_slices((trainX, trainY))
train_dataset = train_dataset.batch(batch_size)


def build(vocab, seq, d_model):
    enc_in = layers.Input((seq,), dtype="int64")
    dec_in = layers.Input((seq,), dtype="int64")
    e = layers.Embedding(vocab, d_model)(enc_in)
    for _ in range(n):
        a = layers.MultiHeadAttention(h, d_k)(e, e)
        e = layers.LayerNormalization()(e + a)
        f = layers.Dense(d_ff, activation="relu")(e)
        e = layers.LayerNormalization()(e + layers.Dense(d_model)(f))
    d = layers.Embedding(vocab, d_model)(dec_in)
    for _ in range(n):
        a = layers.MultiHeadAttention(h, d_k)(d, d, use_causal_mask=True)
        d = layers.LayerNormalization()(d + a)
        c = layers.MultiHeadAttention(h, d_k)(d, e)
        d = layers.LayerNormalization()(d + c)
    out = layers.Dense(vocab)(d)
    return Model([enc_in, dec_in], out)


training_model = build(vocab, enc_seq_length, d_model)


def loss_fcn(target, prediction):
    padding_mask = math.logical_not(equal(target, 0))
    padding_mask = cast(padding_mask, float32)
    loss = sparse_categorical_crossentropy(target, prediction, from_logits=True) * padding_mask
    return reduce_sum(loss) / reduce_sum(padding_mask)


def accuracy_fcn(target, prediction):
    padding_mask = math.logical_not(equal(target, 0))
    accuracy = equal(target, argmax(prediction, axis=2))
    accuracy = math.logical_and(padding_mask, accuracy)
    padding_mask = cast(padding_mask, float32)
    accuracy = cast(accuracy, float32)
    return reduce_sum(accuracy) / reduce_sum(padding_mask)


train_loss = Mean(name="train_loss")
train_accuracy = Mean(name="train_accuracy")


@function
def train_step(encoder_input, decoder_input, decoder_output):
    with GradientTape() as tape:
        prediction = training_model([encoder_input, decoder_input], training=True)
        loss = loss_fcn(decoder_output, prediction)
        accuracy = accuracy_fcn(decoder_output, prediction)
    gradients = tape.gradient(loss, training_model.trainable_weights)
    optimizer.apply_gradients(zip(gradients, training_model.trainable_weights))
    train_loss(loss)
    train_accuracy(accuracy)


for epoch in range(epochs):
    train_loss.reset_state()
    train_accuracy.reset_state()
    print("\nStart of epoch %d" % (epoch + 1))
    start_time = time()
    for step, (train_batchX, train_batchY) in enumerate(train_dataset):
        encoder_input = train_batchX[:, 1:]
        encoder_input = train_batchX
        decoder_input = train_batchY[:, :-1]
        decoder_output = train_batchY[:, 1:]
        train_step(encoder_input, decoder_input, decoder_output)
        if step % 50 == 0:
            print(f"Epoch {epoch + 1} Step {step} Loss {train_loss.result():.4f} Accuracy {train_accuracy.result():.4f}")
    print("Epoch %d: Training Loss %.4f, Training Accuracy %.4f" % (epoch + 1, train_loss.result(), train_accuracy.result()))
print("Total time taken: %.2fs" % (time() - start_time))
