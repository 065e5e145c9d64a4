"""Federated averaging (FedAvg) from scratch in TensorFlow 2 / Keras, after the widely copied
"Federated Learning: A Step by Step Implementation in Tensorflow" (Towards Data Science, 2020):
clients' shards as tf.data datasets, a fresh local model built, compiled and fitted per client per
communication round, the clients' weights scaled by their share of the data and summed into the
global model. Synthetic MNIST-shaped data here (the original reads MNIST jpgs with cv2/imutils)."""

import random

import numpy as np
import tensorflow as tf
from tensorflow.keras import backend as K
from tensorflow.keras.layers import Activation, Dense
from tensorflow.keras.models import Sequential
from tensorflow.keras.optimizers import SGD

random.seed(0)
np.random.seed(0)


def load_data(n=12000, n_test=2000):
    """MNIST-shaped synthetic digits: 784 pixels in [0, 1], one-hot labels from a hidden linear rule."""
    rng = np.random.default_rng(0)
    x = rng.random((n + n_test, 784), dtype=np.float32)
    w = rng.normal(size=(784, 10)).astype(np.float32)
    labels = np.argmax(x @ w + rng.normal(scale=2.0, size=(n + n_test, 10)), axis=1)
    y = np.eye(10, dtype=np.float32)[labels]
    return x[:n], y[:n], x[n:], y[n:]


def create_clients(image_list, label_list, num_clients=10, initial="clients"):
    """return: a dictionary with keys clients' names and value as
    data shards - tuple of images and label lists.
    """
    # create a list of client names
    client_names = ["{}_{}".format(initial, i + 1) for i in range(num_clients)]

    # randomize the data
    data = list(zip(image_list, label_list))
    random.shuffle(data)

    # shard data and place at each client
    size = len(data) // num_clients
    shards = [data[i : i + size] for i in range(0, size * num_clients, size)]

    # number of clients must equal number of shards
    assert len(shards) == len(client_names)

    return {client_names[i]: shards[i] for i in range(len(client_names))}


def batch_data(data_shard, bs=32):
    """Takes in a clients data shard and create a tfds object off it"""
    # seperate shard into data and labels lists
    data, label = zip(*data_shard)
    dataset = tf.data.Dataset.from_tensor_slices((list(data), list(label)))
    return dataset.shuffle(len(label)).batch(bs)


class SimpleMLP:
    @staticmethod
    def build(shape, classes):
        model = Sequential()
        model.add(Dense(200, input_shape=(shape,)))
        model.add(Activation("relu"))
        model.add(Dense(200))
        model.add(Activation("relu"))
        model.add(Dense(classes))
        model.add(Activation("softmax"))
        return model


def weight_scalling_factor(clients_trn_data, client_name):
    client_names = list(clients_trn_data.keys())
    # get the bs
    bs = list(clients_trn_data[client_name])[0][0].shape[0]
    # first calculate the total training data points across clinets
    global_count = (
        sum([tf.data.experimental.cardinality(clients_trn_data[client_name]).numpy() for client_name in client_names])
        * bs
    )
    # get the total number of data points held by a client
    local_count = tf.data.experimental.cardinality(clients_trn_data[client_name]).numpy() * bs
    return local_count / global_count


def scale_model_weights(weight, scalar):
    """function for scaling a models weights"""
    weight_final = []
    steps = len(weight)
    for i in range(steps):
        weight_final.append(scalar * weight[i])
    return weight_final


def sum_scaled_weights(scaled_weight_list):
    """Return the sum of the listed scaled weights. The is equivalent to scaled avg of the weights"""
    avg_grad = list()
    # get the average grad accross all client gradients
    for grad_list_tuple in zip(*scaled_weight_list):
        layer_mean = tf.math.reduce_sum(grad_list_tuple, axis=0)
        avg_grad.append(layer_mean)
    return avg_grad


def test_model(X_test, Y_test, model, comm_round):
    cce = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    logits = model.predict(X_test, verbose=0)
    loss = cce(Y_test, logits)
    acc = np.mean(np.argmax(logits, axis=1) == np.argmax(Y_test, axis=1))  # sklearn's accuracy_score there
    print("comm_round: {} | global_acc: {:.3%} | global_loss: {}".format(comm_round, acc, loss))
    return acc, loss


X_train, y_train, X_test, y_test = load_data()

# create clients
clients = create_clients(X_train, y_train, num_clients=10, initial="client")

# process and batch the training data for each client
clients_batched = dict()
for client_name, data in clients.items():
    clients_batched[client_name] = batch_data(data)

# process and batch the test set
test_batched = tf.data.Dataset.from_tensor_slices((X_test, y_test)).batch(len(y_test))

lr = 0.01
comms_round = 6
loss = "categorical_crossentropy"
metrics = ["accuracy"]

# initialize global model
smlp_global = SimpleMLP()
global_model = smlp_global.build(784, 10)

# commence global training loop
for comm_round in range(comms_round):
    # get the global model's weights - will serve as the initial weights for all local models
    global_weights = global_model.get_weights()

    # initial list to collect local model weights after scalling
    scaled_local_weight_list = list()

    # randomize client data - using keys
    client_names = list(clients_batched.keys())
    random.shuffle(client_names)

    # loop through each client and create new local model
    for client in client_names:
        smlp_local = SimpleMLP()
        local_model = smlp_local.build(784, 10)
        # the original shares one `SGD(lr=lr, decay=lr / comms_round, momentum=0.9)` across the local
        # models: Keras 3 has no `decay` and refuses an optimizer built for another model's variables
        optimizer = SGD(learning_rate=lr, momentum=0.9)
        local_model.compile(loss=loss, optimizer=optimizer, metrics=metrics)

        # set local model weight to the weight of the global model
        local_model.set_weights(global_weights)

        # fit local model with client's data
        local_model.fit(clients_batched[client], epochs=1, verbose=0)

        # scale the model weights and add to list
        scaling_factor = weight_scalling_factor(clients_batched, client)
        scaled_weights = scale_model_weights(local_model.get_weights(), scaling_factor)
        scaled_local_weight_list.append(scaled_weights)

        # clear session to free memory after each communication round
        K.clear_session()

    # to get the average over all the local model, we simply take the sum of the scaled weights
    average_weights = sum_scaled_weights(scaled_local_weight_list)

    # update global model
    global_model.set_weights(average_weights)

    # test global model and print out metrics after each communications round
    for X_test, Y_test in test_batched:
        global_acc, global_loss = test_model(X_test, Y_test, global_model, comm_round)
