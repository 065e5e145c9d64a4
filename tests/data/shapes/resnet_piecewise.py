"""CIFAR ResNet scripts' schedule (the shape of the TensorFlow API docs' example): SGD with momentum on a
PiecewiseConstantDecay whose boundaries are epochs counted in steps of the batch; numpy into fit."""

import numpy as np
import tensorflow as tf

BATCH_SIZE = 128
EPOCHS = 3
rng = np.random.default_rng(0)
x_train = rng.standard_normal((2048, 32, 32, 3)).astype("float32")
y_train = rng.integers(0, 10, 2048)
steps_per_epoch = len(x_train) // BATCH_SIZE

lr_schedule = tf.keras.optimizers.schedules.PiecewiseConstantDecay(
    boundaries=[steps_per_epoch * 80, steps_per_epoch * 120], values=[0.1, 0.01, 0.001]
)
model = tf.keras.Sequential(
    [tf.keras.Input((32, 32, 3)), tf.keras.layers.Conv2D(16, 3, activation="relu"),
     tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10)]
)
model.compile(
    optimizer=tf.keras.optimizers.SGD(learning_rate=lr_schedule, momentum=0.9),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=EPOCHS)
