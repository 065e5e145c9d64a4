"""The shape of eriklindernoren/Keras-GAN (``gan/gan.py``, ``dcgan/dcgan.py``), forked by thousands: a
``GAN`` class whose ``__init__`` builds and compiles a discriminator, builds a generator, freezes the
discriminator and compiles the ``combined`` model; ``train()`` samples a random batch of real images with
``np.random.randint``, makes fakes with ``self.generator.predict(noise)``, and calls
``train_on_batch`` three times a step; ``batch_size`` and ``epochs`` are ``train()``'s arguments given at
the call. Synthetic 16x16 images instead of MNIST; no image saving.

    python keras_gan.py
"""

import numpy as np
from tensorflow.keras.layers import BatchNormalization, Dense, Flatten, Input, LeakyReLU, Reshape
from tensorflow.keras.models import Model, Sequential
from tensorflow.keras.optimizers import Adam


class GAN:
    def __init__(self):
        self.img_rows = 16
        self.img_cols = 16
        self.channels = 1
        self.img_shape = (self.img_rows, self.img_cols, self.channels)
        self.latent_dim = 64

        optimizer = Adam(0.0002, 0.5)

        # Build and compile the discriminator
        self.discriminator = self.build_discriminator()
        self.discriminator.compile(loss="binary_crossentropy", optimizer=optimizer, metrics=["accuracy"])

        # Build the generator
        self.generator = self.build_generator()

        # The generator takes noise as input and generates imgs
        z = Input(shape=(self.latent_dim,))
        img = self.generator(z)

        # For the combined model we will only train the generator
        self.discriminator.trainable = False

        # The discriminator takes generated images as input and determines validity
        validity = self.discriminator(img)

        # The combined model  (stacked generator and discriminator)
        # Trains the generator to fool the discriminator
        self.combined = Model(z, validity)
        self.combined.compile(loss="binary_crossentropy", optimizer=Adam(0.0002, 0.5))

    def build_generator(self):
        model = Sequential()

        model.add(Input(shape=(self.latent_dim,)))
        model.add(Dense(256))
        model.add(LeakyReLU(negative_slope=0.2))
        model.add(BatchNormalization(momentum=0.8))
        model.add(Dense(512))
        model.add(LeakyReLU(negative_slope=0.2))
        model.add(BatchNormalization(momentum=0.8))
        model.add(Dense(int(np.prod(self.img_shape)), activation="tanh"))  # Keras 3 refuses a numpy int
        model.add(Reshape(self.img_shape))

        model.summary()

        noise = Input(shape=(self.latent_dim,))
        img = model(noise)

        return Model(noise, img)

    def build_discriminator(self):
        model = Sequential()

        model.add(Input(shape=self.img_shape))
        model.add(Flatten())
        model.add(Dense(512))
        model.add(LeakyReLU(negative_slope=0.2))
        model.add(Dense(256))
        model.add(LeakyReLU(negative_slope=0.2))
        model.add(Dense(1, activation="sigmoid"))
        model.summary()

        img = Input(shape=self.img_shape)
        validity = model(img)

        return Model(img, validity)

    def train(self, epochs, batch_size=128, sample_interval=50):
        # Load the dataset (synthetic digits-like blobs instead of MNIST)
        rng = np.random.default_rng(0)
        X_train = rng.normal(0.0, 0.3, size=(6000, self.img_rows, self.img_cols)).astype("float32")
        X_train[:, 4:12, 6:10] += 1.0

        # Rescale -1 to 1
        X_train = np.clip(X_train, -1.0, 1.0)
        X_train = np.expand_dims(X_train, axis=3)

        # Adversarial ground truths
        valid = np.ones((batch_size, 1))
        fake = np.zeros((batch_size, 1))

        for epoch in range(epochs):
            # ---------------------
            #  Train Discriminator
            # ---------------------

            # Select a random batch of images
            idx = np.random.randint(0, X_train.shape[0], batch_size)
            imgs = X_train[idx]

            noise = np.random.normal(0, 1, (batch_size, self.latent_dim))

            # Generate a batch of new images
            gen_imgs = self.generator.predict(noise)

            # Train the discriminator
            d_loss_real = self.discriminator.train_on_batch(imgs, valid)
            d_loss_fake = self.discriminator.train_on_batch(gen_imgs, fake)
            d_loss = 0.5 * np.add(d_loss_real, d_loss_fake)

            # ---------------------
            #  Train Generator
            # ---------------------

            noise = np.random.normal(0, 1, (batch_size, self.latent_dim))

            # Train the generator (to have the discriminator label samples as valid)
            g_loss = self.combined.train_on_batch(noise, valid)

            # Plot the progress
            if epoch % sample_interval == 0:
                print("%d [D loss: %f, acc.: %.2f%%] [G loss: %f]" % (epoch, d_loss[0], 100 * d_loss[1], g_loss))


if __name__ == "__main__":
    gan = GAN()
    gan.train(epochs=600, batch_size=32, sample_interval=100)
