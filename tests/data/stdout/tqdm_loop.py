import sys
import time

from tqdm import tqdm

w = 0.0
for epoch in range(2):
    bar = tqdm(range(40), desc=f"epoch {epoch}", file=sys.stdout)
    for _ in bar:
        time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.01)
        w += 0.1
        bar.set_postfix(loss=f"{1 / (1 + w):.4f}")
    print(f"epoch {epoch} done in {time.perf_counter():.2f}s, loss {1 / (1 + w):.4f}")
