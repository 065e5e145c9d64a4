"""A TF1-style script on TF2: eager execution off, placeholders, a tf.compat.v1.Session fed batches."""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

rng = np.random.default_rng(0)
x_train = rng.normal(size=(2048, 16)).astype("float32")
y_train = (x_train.sum(axis=1) > 0).astype("int64")

x = tf.compat.v1.placeholder(tf.float32, [None, 16])
y = tf.compat.v1.placeholder(tf.int64, [None])
w = tf.compat.v1.get_variable("w", [16, 2], initializer=tf.compat.v1.glorot_uniform_initializer())
logits = tf.matmul(x, w)
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
train_op = tf.compat.v1.train.AdamOptimizer(1e-2).minimize(loss)

with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for i in range(len(x_train) // 64):
        _, value = sess.run(
            [train_op, loss], feed_dict={x: x_train[i * 64 : (i + 1) * 64], y: y_train[i * 64 : (i + 1) * 64]}
        )
    print(f"final loss {value:.3f}")
