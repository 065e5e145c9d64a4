"""Helpers beside the training script, as pierremtb/PINNs-TF2.0's ``1d-burgers/burgersutil.py`` has them
(``prep_data`` reads ``burgers_shock.mat`` there; here a synthetic field of the same sizes, and no plots)."""

import time
from datetime import datetime

import numpy as np
import tensorflow as tf

appDataPath = "data"


def prep_data(path, N_u=None, N_f=None, noise=0.0):
    # 256 x 100 grid of (x, t), as the .mat file has
    t = np.linspace(0.0, 1.0, 100).flatten()[:, None]
    x = np.linspace(-1.0, 1.0, 256).flatten()[:, None]
    X, T = np.meshgrid(x, t)
    Exact_u = -np.sin(np.pi * X) * np.exp(-T)

    X_star = np.hstack((X.flatten()[:, None], T.flatten()[:, None]))
    u_star = Exact_u.flatten()[:, None]

    lb = X_star.min(axis=0)
    ub = X_star.max(axis=0)
    # initial condition (t=0) and the two boundaries (x=-1, x=1)
    xx1 = np.hstack((X[0:1, :].T, T[0:1, :].T))
    uu1 = Exact_u[0:1, :].T
    xx2 = np.hstack((X[:, 0:1], T[:, 0:1]))
    uu2 = Exact_u[:, 0:1]
    xx3 = np.hstack((X[:, -1:], T[:, -1:]))
    uu3 = Exact_u[:, -1:]
    X_u_train = np.vstack([xx1, xx2, xx3])
    u_train = np.vstack([uu1, uu2, uu3])

    # collocation points spread over the domain (pyDOE's lhs in the original)
    X_f_train = lb + (ub - lb) * np.random.rand(N_f, 2)

    idx = np.random.choice(X_u_train.shape[0], N_u, replace=False)
    X_u_train = X_u_train[idx, :]
    u_train = u_train[idx, :]
    return x, t, X, T, Exact_u, X_star, u_star, X_u_train, u_train, X_f_train


class Logger(object):  # noqa: UP004 (as the repository writes it)
    def __init__(self, X_star, u_star):
        print("TensorFlow version: {}".format(tf.__version__))
        print("Eager execution: {}".format(tf.executing_eagerly()))

        self.X_star = X_star
        self.u_star = u_star
        self.start_time = time.time()

    def __get_elapsed(self):
        return datetime.fromtimestamp(time.time() - self.start_time).strftime("%M:%S")

    def __get_error_u(self):
        u_pred = self.model.predict(self.X_star)
        return np.linalg.norm(self.u_star - u_pred, 2) / np.linalg.norm(self.u_star, 2)

    def log_train_start(self, model):
        print("\nTraining started")
        print("================")
        self.model = model

    def log_train_epoch(self, epoch, loss, custom=""):
        print(
            f"epoch = {epoch:6d}  elapsed = {self.__get_elapsed()}  loss = {loss:.4e}  "
            f"error = {self.__get_error_u():.4e}  " + custom
        )

    def log_train_end(self, epoch, custom=""):
        print("==================")
        print(f"Training finished (epoch {epoch}): duration = {self.__get_elapsed()}  error = {self.__get_error_u():.4e}  " + custom)
