"""The shape of the DeepLearning.AI "TensorFlow Developer" course's time-series notebooks, copied into
countless repositories: a synthetic series (trend + seasonality + noise), ``windowed_dataset(series,
window_size, batch_size, shuffle_buffer)`` built with ``window()`` / ``flat_map()`` / ``shuffle()`` /
``map()`` / ``batch()`` / ``prefetch(1)``, a ``Lambda`` expanding dims, a ``Conv1D`` + two ``LSTM``
layers and a ``Lambda(lambda x: x * 100.0)`` output, ``Huber`` loss, ``SGD(momentum=0.9)``, and
``model.fit(dataset, epochs=...)``.

    python windowed_dataset.py
"""

import numpy as np
import tensorflow as tf


def trend(time, slope=0):
    return slope * time


def seasonal_pattern(season_time):
    """Just an arbitrary pattern, you can change it if you wish"""
    return np.where(season_time < 0.4, np.cos(season_time * 2 * np.pi), 1 / np.exp(3 * season_time))


def seasonality(time, period, amplitude=1, phase=0):
    """Repeats the same pattern at each period"""
    season_time = ((time + phase) % period) / period
    return amplitude * seasonal_pattern(season_time)


def noise(time, noise_level=1, seed=None):
    rnd = np.random.RandomState(seed)
    return rnd.randn(len(time)) * noise_level


time = np.arange(4 * 365 + 1, dtype="float32")
baseline = 10
series = trend(time, 0.05)
amplitude = 40
slope = 0.05
noise_level = 5

# Create the series
series = baseline + trend(time, slope) + seasonality(time, period=365, amplitude=amplitude)
# Update with noise
series += noise(time, noise_level, seed=42)

split_time = 1000
time_train = time[:split_time]
x_train = series[:split_time]
time_valid = time[split_time:]
x_valid = series[split_time:]

window_size = 20
batch_size = 32
shuffle_buffer_size = 1000


def windowed_dataset(series, window_size, batch_size, shuffle_buffer):
    dataset = tf.data.Dataset.from_tensor_slices(series)
    dataset = dataset.window(window_size + 1, shift=1, drop_remainder=True)
    dataset = dataset.flat_map(lambda window: window.batch(window_size + 1))
    dataset = dataset.shuffle(shuffle_buffer).map(lambda window: (window[:-1], window[-1]))
    dataset = dataset.batch(batch_size).prefetch(1)
    return dataset


tf.keras.backend.clear_session()
tf.random.set_seed(51)
np.random.seed(51)

dataset = windowed_dataset(x_train, window_size, batch_size, shuffle_buffer_size)

model = tf.keras.models.Sequential(
    [
        tf.keras.layers.Input(shape=(window_size,)),
        tf.keras.layers.Lambda(lambda x: tf.expand_dims(x, axis=-1)),
        tf.keras.layers.Conv1D(filters=32, kernel_size=5, strides=1, padding="causal", activation="relu"),
        tf.keras.layers.LSTM(64, return_sequences=True),
        tf.keras.layers.LSTM(64),
        tf.keras.layers.Dense(1),
        tf.keras.layers.Lambda(lambda x: x * 100.0),
    ]
)

optimizer = tf.keras.optimizers.SGD(learning_rate=1e-5, momentum=0.9)
model.compile(loss=tf.keras.losses.Huber(), optimizer=optimizer, metrics=["mae"])
history = model.fit(dataset, epochs=20)

forecast = model.predict(
    windowed_dataset(series[split_time - window_size :], window_size, batch_size, 1).map(lambda x, y: x),
    verbose=0,
)
print("MAE:", np.mean(np.abs(x_valid[: len(forecast)] - forecast.squeeze())))
