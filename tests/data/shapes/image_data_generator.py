"""Shape of the many CIFAR-10 repositories that augment with ImageDataGenerator and fit on its flow() (synthetic data)."""
import numpy as np
import tensorflow as tf
from tensorflow.keras.preprocessing.image import ImageDataGenerator
from tensorflow.keras.models import Sequential
from tensorflow.keras.layers import Conv2D, MaxPooling2D, Dense, Flatten, Dropout, BatchNormalization
from tensorflow.keras.optimizers import Adam

batch_size = 64
epochs = 50
num_classes = 10

rng = np.random.default_rng(0)
x_train = rng.integers(0, 255, (10000, 32, 32, 3)).astype("float32") / 255.0
y_train = tf.keras.utils.to_categorical(rng.integers(0, 10, 10000), num_classes)
x_test = rng.integers(0, 255, (2000, 32, 32, 3)).astype("float32") / 255.0
y_test = tf.keras.utils.to_categorical(rng.integers(0, 10, 2000), num_classes)

model = Sequential()
model.add(Conv2D(32, (3, 3), padding='same', activation='relu', input_shape=(32, 32, 3)))
model.add(BatchNormalization())
model.add(MaxPooling2D((2, 2)))
model.add(Conv2D(64, (3, 3), padding='same', activation='relu'))
model.add(BatchNormalization())
model.add(MaxPooling2D((2, 2)))
model.add(Flatten())
model.add(Dense(128, activation='relu'))
model.add(Dropout(0.5))
model.add(Dense(num_classes, activation='softmax'))

model.compile(loss='categorical_crossentropy', optimizer=Adam(learning_rate=0.001), metrics=['accuracy'])

datagen = ImageDataGenerator(
    rotation_range=15,
    width_shift_range=0.1,
    height_shift_range=0.1,
    horizontal_flip=True,
)
datagen.fit(x_train)

history = model.fit(datagen.flow(x_train, y_train, batch_size=batch_size),
                    steps_per_epoch=x_train.shape[0] // batch_size,
                    epochs=epochs,
                    validation_data=(x_test, y_test),
                    verbose=1)
scores = model.evaluate(x_test, y_test, verbose=1)
print('Test accuracy:', scores[1])
