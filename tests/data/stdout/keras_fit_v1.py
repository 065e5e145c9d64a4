import sys

import keras
import numpy as np

x = np.random.rand(512, 16).astype("float32")
y = (x.sum(1) > 8).astype("float32")
m = keras.Sequential(
    [
        keras.Input((16,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
m.compile("adam", "binary_crossentropy", metrics=["accuracy"])
m.fit(x, y, batch_size=int(sys.argv[1]) if len(sys.argv) > 1 else 16, epochs=2, verbose=1)
print("final accuracy", float(m.evaluate(x, y, verbose=0)[1]))
