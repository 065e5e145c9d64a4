"""Shape of the Keras mixed precision guide, run on a CPU."""
import numpy as np
import keras
from keras import layers, mixed_precision

mixed_precision.set_global_policy("mixed_float16")

inputs = keras.Input(shape=(784,), name="digits")
num_units = 1024
dense1 = layers.Dense(num_units, activation="relu", name="dense_1")
x = dense1(inputs)
dense2 = layers.Dense(num_units, activation="relu", name="dense_2")
x = dense2(x)
x = layers.Dense(10, name="dense_logits")(x)
outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.RMSprop(), metrics=["accuracy"])

rng = np.random.default_rng(0)
x_train = rng.random((8192, 784), dtype="float32")
y_train = rng.integers(0, 10, 8192)
history = model.fit(x_train, y_train, batch_size=256, epochs=3, validation_split=0.2)
