"""A script left with debugging switches from a NaN hunt: check_numerics on (and left on), the op-placement
log turned off, tensor dumping turned on and off again. Under tfdoctor only the switch left on is a fact."""

import sys

import keras
import numpy as np
import tensorflow as tf

tf.debugging.enable_check_numerics()
tf.debugging.set_log_device_placement(False)
tf.debugging.experimental.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="NO_TENSOR")
tf.debugging.experimental.disable_dump_debug_info()

x = np.random.rand(512, 8).astype("float32")
y = np.random.randint(0, 2, 512)
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
)
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=4, verbose=0)
