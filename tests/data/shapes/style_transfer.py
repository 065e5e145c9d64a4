"""Neural style transfer: the shape of TensorFlow's tutorial (a frozen feature extractor, the image
itself the variable trained, a @tf.function() train_step returning nothing, progress dots)."""

import time

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
content_image = tf.constant(rng.uniform(size=(1, 96, 96, 3)).astype("float32"))
style_image = tf.constant(rng.uniform(size=(1, 96, 96, 3)).astype("float32"))


def vgg_layers(layer_names):
    """Creates a VGG-like model that returns a list of intermediate output values."""
    inputs = tf.keras.Input((None, None, 3))
    x = inputs
    outs = {}
    for i, filters in enumerate([32, 64, 64, 128]):
        x = tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"block{i + 1}_conv1")(x)
        outs[f"block{i + 1}_conv1"] = x
        x = tf.keras.layers.MaxPooling2D(name=f"block{i + 1}_pool")(x)
    model = tf.keras.Model(inputs, [outs[name] for name in layer_names])
    model.trainable = False
    return model


def gram_matrix(input_tensor):
    result = tf.linalg.einsum("bijc,bijd->bcd", input_tensor, input_tensor)
    input_shape = tf.shape(input_tensor)
    num_locations = tf.cast(input_shape[1] * input_shape[2], tf.float32)
    return result / (num_locations)


class StyleContentModel(tf.keras.models.Model):
    def __init__(self, style_layers, content_layers):
        super(StyleContentModel, self).__init__()
        self.vgg = vgg_layers(style_layers + content_layers)
        self.style_layers = style_layers
        self.content_layers = content_layers
        self.num_style_layers = len(style_layers)
        self.vgg.trainable = False

    def call(self, inputs):
        "Expects float input in [0,1]"
        inputs = inputs * 255.0
        outputs = self.vgg(inputs)
        style_outputs, content_outputs = (outputs[: self.num_style_layers], outputs[self.num_style_layers :])

        style_outputs = [gram_matrix(style_output) for style_output in style_outputs]

        content_dict = {content_name: value for content_name, value in zip(self.content_layers, content_outputs)}
        style_dict = {style_name: value for style_name, value in zip(self.style_layers, style_outputs)}
        return {"content": content_dict, "style": style_dict}


content_layers = ["block4_conv1"]
style_layers = ["block1_conv1", "block2_conv1", "block3_conv1", "block4_conv1"]
num_content_layers = len(content_layers)
num_style_layers = len(style_layers)

extractor = StyleContentModel(style_layers, content_layers)
style_targets = extractor(style_image)["style"]
content_targets = extractor(content_image)["content"]

image = tf.Variable(content_image)


def clip_0_1(image):
    return tf.clip_by_value(image, clip_value_min=0.0, clip_value_max=1.0)


opt = tf.keras.optimizers.Adam(learning_rate=0.02, beta_1=0.99, epsilon=1e-1)

style_weight = 1e-2
content_weight = 1e4
total_variation_weight = 30


def style_content_loss(outputs):
    style_outputs = outputs["style"]
    content_outputs = outputs["content"]
    style_loss = tf.add_n([tf.reduce_mean((style_outputs[name] - style_targets[name]) ** 2) for name in style_outputs.keys()])
    style_loss *= style_weight / num_style_layers

    content_loss = tf.add_n(
        [tf.reduce_mean((content_outputs[name] - content_targets[name]) ** 2) for name in content_outputs.keys()]
    )
    content_loss *= content_weight / num_content_layers
    loss = style_loss + content_loss
    return loss


@tf.function()
def train_step(image):
    with tf.GradientTape() as tape:
        outputs = extractor(image)
        loss = style_content_loss(outputs)
        loss += total_variation_weight * tf.image.total_variation(image)

    grad = tape.gradient(loss, image)
    opt.apply_gradients([(grad, image)])
    image.assign(clip_0_1(image))


start = time.time()

epochs = 10
steps_per_epoch = 100

step = 0
for n in range(epochs):
    for m in range(steps_per_epoch):
        step += 1
        train_step(image)
        print(".", end="", flush=True)
    print("Train step: {}".format(step))

end = time.time()
print("Total time: {:.1f}".format(end - start))
