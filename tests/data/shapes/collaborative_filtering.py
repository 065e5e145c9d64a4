"""
Title: Collaborative Filtering for Movie Recommendations
Shape of the keras-io example (as it is written, `tf.keras` imports): prose in bare strings, the
ratings table encoded to integer indices with dicts, a `RecommenderNet(keras.Model)` subclass whose
`call` ends in `tf.nn.sigmoid(x)` (no output layer to keep float32), `fit` on numpy arrays with batch
size 64 and the default progress bar. pandas and matplotlib are not installed here: the ratings are a
synthetic numpy table in the MovieLens columns, and the plot prints the history it would draw.
"""

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

"""
## First, load the data and apply preprocessing
"""

rng = np.random.default_rng(42)
n_ratings = 60000
user_col = rng.integers(1, 611, size=n_ratings)
movie_col = rng.choice(np.arange(1, 200000, 21), size=n_ratings)
affinity = np.sin(user_col * 0.37) * np.cos(movie_col * 0.011)
rating_col = np.clip(np.round((3.0 + 1.5 * affinity + rng.normal(0, 0.5, n_ratings)) * 2) / 2, 0.5, 5.0)

"""
First, need to perform some preprocessing to encode users and movies as integer indices.
"""
user_ids = list(dict.fromkeys(user_col.tolist()))
user2user_encoded = {x: i for i, x in enumerate(user_ids)}
userencoded2user = {i: x for i, x in enumerate(user_ids)}
movie_ids = list(dict.fromkeys(movie_col.tolist()))
movie2movie_encoded = {x: i for i, x in enumerate(movie_ids)}
movie_encoded2movie = {i: x for i, x in enumerate(movie_ids)}
user = np.array([user2user_encoded[u] for u in user_col])
movie = np.array([movie2movie_encoded[m] for m in movie_col])

num_users = len(user2user_encoded)
num_movies = len(movie_encoded2movie)
rating = rating_col.astype(np.float32)
# min and max ratings will be used to normalize the ratings later
min_rating = min(rating)
max_rating = max(rating)

print(
    "Number of users: {}, Number of Movies: {}, Min rating: {}, Max rating: {}".format(
        num_users, num_movies, min_rating, max_rating
    )
)

"""
## Prepare training and validation data
"""
order = np.random.default_rng(42).permutation(n_ratings)
x = np.stack([user, movie], axis=1)[order]
# Normalize the targets between 0 and 1. Makes it easy to train.
y = np.array([(r - min_rating) / (max_rating - min_rating) for r in rating[order]])
# Assuming training on 90% of the data and validating on 10%.
train_indices = int(0.9 * n_ratings)
x_train, x_val, y_train, y_val = (
    x[:train_indices],
    x[train_indices:],
    y[:train_indices],
    y[train_indices:],
)

"""
## Create the model

We embed both users and movies in to 50-dimensional vectors.

The model computes a match score between user and movie embeddings via a dot product,
and adds a per-movie and per-user bias. The match score is scaled to the `[0, 1]`
interval via a sigmoid (since our ratings are normalized to this range).
"""
EMBEDDING_SIZE = 50


class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super(RecommenderNet, self).__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(
            num_users,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(
            num_movies,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = tf.tensordot(user_vector, movie_vector, 2)
        # Add all the components (including bias)
        x = dot_user_movie + user_bias + movie_bias
        # The sigmoid activation forces the rating to between 0 and 1
        return tf.nn.sigmoid(x)


model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
model.compile(
    loss=tf.keras.losses.BinaryCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=0.001),
)

"""
## Train the model based on the data split
"""
history = model.fit(
    x=x_train,
    y=y_train,
    batch_size=64,
    epochs=5,
    verbose=1,
    validation_data=(x_val, y_val),
)

"""
## Plot training and validation loss
"""
print("model loss:", history.history["loss"], history.history["val_loss"])

"""
## Show top 10 movie recommendations to a user
"""
user_id = int(rng.choice(user_col))
movies_watched_by_user = set(movie_col[user_col == user_id].tolist())
movies_not_watched = [m for m in movie_ids if m not in movies_watched_by_user]
movies_not_watched = [[movie2movie_encoded.get(m)] for m in movies_not_watched]
user_encoder = user2user_encoded.get(user_id)
user_movie_array = np.hstack(([[user_encoder]] * len(movies_not_watched), movies_not_watched))
ratings = model.predict(user_movie_array).flatten()
top_ratings_indices = ratings.argsort()[-10:][::-1]
recommended_movie_ids = [movie_encoded2movie.get(movies_not_watched[i][0]) for i in top_ratings_indices]
print("Showing recommendations for user: {}".format(user_id))
print("Top 10 movie recommendations:", recommended_movie_ids)
