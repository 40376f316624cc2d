/**
 * Per-key request coalescing ("group commit" in the application): while one flush for a key
 * is in flight, later requests for that key wait and are then flushed together. Issuing refs
 * for one principal serializes on its counter row in Postgres, so without this N concurrent
 * issuances cost N sequential commits; with it they cost a handful. Correctness never
 * depends on it: the database lock stays authoritative across replicas.
 */
export interface Coalescer<T, R> {
  /** Resolves with the flush result of the batch `items` ended up in. */
  submit(key: string, items: readonly T[]): Promise<R>;
}

export function createCoalescer<T, R>(flush: (key: string, items: T[]) => Promise<R>, options: { maxBatch: number }): Coalescer<T, R> {
  interface Waiter {
    items: readonly T[];
    resolve(result: R): void;
    reject(error: unknown): void;
  }
  const queues = new Map<string, Waiter[]>();

  async function drain(key: string, queue: Waiter[]): Promise<void> {
    while (queue.length > 0) {
      const batch: Waiter[] = [];
      let size = 0;
      while (queue.length > 0 && (batch.length === 0 || size + (queue[0]?.items.length ?? 0) <= options.maxBatch)) {
        const next = queue.shift() as Waiter;
        batch.push(next);
        size += next.items.length;
      }
      try {
        const result = await flush(
          key,
          batch.flatMap((w) => [...w.items]),
        );
        for (const w of batch) w.resolve(result);
      } catch (error) {
        if (batch.length === 1) {
          batch[0]?.reject(error);
          continue;
        }
        // Isolate the failure: one bad request must not fail the others it was batched with.
        for (const w of batch) {
          try {
            w.resolve(await flush(key, [...w.items]));
          } catch (own) {
            w.reject(own);
          }
        }
      }
    }
    queues.delete(key);
  }

  return {
    submit(key, items) {
      return new Promise<R>((resolve, reject) => {
        const queue = queues.get(key);
        if (queue) {
          queue.push({ items, resolve, reject });
          return;
        }
        const fresh: Waiter[] = [{ items, resolve, reject }];
        queues.set(key, fresh);
        void drain(key, fresh);
      });
    },
  };
}
