"""Expert twin of gan_fit.py: the same GAN, batch size 64, both Adam(2e-4, beta_1=0.5), float32.
``compile`` passes its keyword arguments on to ``super().compile()``, so ``steps_per_execution``
(and ``jit_compile``, off: measured slower for these convolutions on a CPU) reach Keras; the
pipeline normalises once, caches, and prefetches.

    python examples/corpus/gan_fit_expert.py --epochs 1
"""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=False)
args = parser.parse_args()

STEPS_PER_EXECUTION = 16
JIT = args.jit  # XLA's CPU convolutions lose to oneDNN here: measured, so off by default

keras.utils.set_random_seed(1337)

"""
## Prepare the data: 28x28 grey "digits" (blobs at a few positions), scaled to [-1, 1]
"""
rng = np.random.default_rng(1337)
num_images = 8192
yy, xx = np.mgrid[0:28, 0:28]
centres = rng.integers(6, 22, size=(num_images, 2))
sigma = rng.uniform(2.0, 4.0, size=(num_images, 1, 1))
images = np.exp(-((yy - centres[:, :1, None]) ** 2 + (xx - centres[:, 1:, None]) ** 2) / (2 * sigma**2))
images = (images * 255).astype("uint8")[..., None]

batch_size = 64
dataset = tf.data.Dataset.from_tensor_slices(images)
dataset = (
    dataset.map(lambda x: (tf.cast(x, "float32") - 127.5) / 127.5)
    .cache()
    .shuffle(1024)
    .batch(batch_size, drop_remainder=True)
    .prefetch(tf.data.AUTOTUNE)
)

"""
## Create the discriminator and the generator
"""
discriminator = keras.Sequential(
    [
        keras.Input(shape=(28, 28, 1)),
        layers.Flatten(),
        layers.Dense(512),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Dense(256),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Dropout(0.2),
        layers.Dense(1, activation="sigmoid"),
    ],
    name="discriminator",
)

latent_dim = 64
generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        layers.Dense(256),
        layers.LeakyReLU(negative_slope=0.2),
        layers.BatchNormalization(),
        layers.Dense(512),
        layers.LeakyReLU(negative_slope=0.2),
        layers.BatchNormalization(),
        layers.Dense(28 * 28, activation="tanh"),
        layers.Reshape((28, 28, 1)),
    ],
    name="generator",
)


"""
## Override `train_step`
"""


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim, **kwargs):
        super().__init__(**kwargs)
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, d_optimizer, g_optimizer, loss_fn, **kwargs):
        super().compile(**kwargs)
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, real_images):
        # Sample random points in the latent space
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )

        # Decode them to fake images
        generated_images = self.generator(random_latent_vectors)

        # Combine them with real images
        combined_images = ops.concatenate([generated_images, real_images], axis=0)

        # Assemble labels discriminating real from fake images
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
        # Add random noise to the labels - important trick!
        labels += 0.05 * tf.random.uniform(tf.shape(labels))

        # Train the discriminator
        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

        # Sample random points in the latent space
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )

        # Assemble labels that say "all real images"
        misleading_labels = ops.zeros((batch_size, 1))

        # Train the generator (note that we should *not* update the weights
        # of the discriminator)!
        with tf.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))

        # Update metrics
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {
            "d_loss": self.d_loss_metric.result(),
            "g_loss": self.g_loss_metric.result(),
        }


"""
## Train the end-to-end model
"""
gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5),
    loss_fn=keras.losses.BinaryCrossentropy(),
    steps_per_execution=STEPS_PER_EXECUTION,
    jit_compile=JIT,
)

gan.fit(dataset, epochs=args.epochs)
