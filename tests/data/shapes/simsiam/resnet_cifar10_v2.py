"""A small pre-activation ResNet for 32x32 images, in the form of the ``resnet_cifar10_v2.py`` module
keras-io's SimSiam example downloads beside itself and imports (``stem(x)``, ``learner(x, n_blocks)``);
our own code, narrower filters so that a step fits a 2-core CPU."""

from tensorflow.keras import layers


def stem(inputs):
    x = layers.Conv2D(16, (3, 3), strides=(1, 1), padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    return x


def residual_block(x, n_filters, strides=(1, 1)):
    shortcut = x
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.Conv2D(n_filters, (3, 3), strides=strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.Conv2D(n_filters, (3, 3), strides=(1, 1), padding="same", use_bias=False)(x)
    if strides != (1, 1) or shortcut.shape[-1] != n_filters:
        shortcut = layers.Conv2D(n_filters, (1, 1), strides=strides, use_bias=False)(shortcut)
    return layers.add([shortcut, x])


def learner(x, n_blocks):
    for n_filters in (16, 32):
        x = residual_block(x, n_filters, strides=(2, 2))
        for _ in range(n_blocks):
            x = residual_block(x, n_filters)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    return x
