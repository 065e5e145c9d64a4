"""Shape of the TensorFlow pix2pix tutorial's training loop (tiny synthetic images)."""
import datetime
import time

import numpy as np
import tensorflow as tf

BATCH_SIZE = 1
IMG = 32
OUTPUT_CHANNELS = 3
LAMBDA = 100
rng = np.random.default_rng(0)
inp_np = rng.random((64, IMG, IMG, 3), dtype="float32")
tar_np = rng.random((64, IMG, IMG, 3), dtype="float32")


def load_image_train(i, t):
    i = tf.image.resize(i, [IMG, IMG])
    return i * 2 - 1, t * 2 - 1


train_dataset = tf.data.Dataset.from_tensor_slices((inp_np, tar_np))
train_dataset = train_dataset.map(load_image_train, num_parallel_calls=tf.data.AUTOTUNE)
train_dataset = train_dataset.shuffle(400)
train_dataset = train_dataset.batch(BATCH_SIZE)


def Generator():
    inputs = tf.keras.layers.Input(shape=[IMG, IMG, 3])
    x = tf.keras.layers.Conv2D(16, 4, strides=2, padding="same")(inputs)
    x = tf.keras.layers.LeakyReLU()(x)
    x = tf.keras.layers.Conv2DTranspose(OUTPUT_CHANNELS, 4, strides=2, padding="same", activation="tanh")(x)
    return tf.keras.Model(inputs=inputs, outputs=x)


def Discriminator():
    inp = tf.keras.layers.Input(shape=[IMG, IMG, 3], name="input_image")
    tar = tf.keras.layers.Input(shape=[IMG, IMG, 3], name="target_image")
    x = tf.keras.layers.concatenate([inp, tar])
    x = tf.keras.layers.Conv2D(16, 4, strides=2, padding="same")(x)
    x = tf.keras.layers.LeakyReLU()(x)
    last = tf.keras.layers.Conv2D(1, 4, strides=1, padding="same")(x)
    return tf.keras.Model(inputs=[inp, tar], outputs=last)


generator = Generator()
discriminator = Discriminator()
loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True)


def generator_loss(disc_generated_output, gen_output, target):
    gan_loss = loss_object(tf.ones_like(disc_generated_output), disc_generated_output)
    l1_loss = tf.reduce_mean(tf.abs(target - gen_output))
    total_gen_loss = gan_loss + (LAMBDA * l1_loss)
    return total_gen_loss, gan_loss, l1_loss


def discriminator_loss(disc_real_output, disc_generated_output):
    real_loss = loss_object(tf.ones_like(disc_real_output), disc_real_output)
    generated_loss = loss_object(tf.zeros_like(disc_generated_output), disc_generated_output)
    return real_loss + generated_loss


generator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)
discriminator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)
log_dir = "logs/"
summary_writer = tf.summary.create_file_writer(log_dir + "fit/" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))


@tf.function
def train_step(input_image, target, step):
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        gen_output = generator(input_image, training=True)
        disc_real_output = discriminator([input_image, target], training=True)
        disc_generated_output = discriminator([input_image, gen_output], training=True)
        gen_total_loss, gen_gan_loss, gen_l1_loss = generator_loss(disc_generated_output, gen_output, target)
        disc_loss = discriminator_loss(disc_real_output, disc_generated_output)
    generator_gradients = gen_tape.gradient(gen_total_loss, generator.trainable_variables)
    discriminator_gradients = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    generator_optimizer.apply_gradients(zip(generator_gradients, generator.trainable_variables))
    discriminator_optimizer.apply_gradients(zip(discriminator_gradients, discriminator.trainable_variables))
    with summary_writer.as_default():
        tf.summary.scalar("gen_total_loss", gen_total_loss, step=step // 1000)
        tf.summary.scalar("disc_loss", disc_loss, step=step // 1000)


def fit(train_ds, steps):
    start = time.time()
    for step, (input_image, target) in train_ds.repeat().take(steps).enumerate():
        if (step) % 100 == 0:
            if step != 0:
                print(f"Time taken for 100 steps: {time.time()-start:.2f} sec\n")
            start = time.time()
            print(f"Step: {step//100}k")
        train_step(input_image, target, step)
        if (step + 1) % 10 == 0:
            print(".", end="", flush=True)


fit(train_dataset, steps=400)
