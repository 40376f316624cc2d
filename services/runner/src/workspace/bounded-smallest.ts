/**
 * Keeps the `limit` smallest items of a stream in O(limit) memory: buffer up to 2×limit, then
 * sort and drop the tail. Once full, anything not below the current threshold is rejected with
 * one comparison, so long streams cost little more than reading them.
 */
export class BoundedSmallest<T> {
  private items: T[] = [];
  private full = false;

  constructor(
    private readonly limit: number,
    private readonly compare: (a: T, b: T) => number,
  ) {}

  add(item: T): void {
    const threshold = this.threshold;
    if (threshold !== undefined && this.compare(item, threshold) >= 0) return;
    this.items.push(item);
    if (this.items.length >= this.limit * 2) this.compact();
  }

  /** Largest kept item once the buffer is full, i.e. anything greater can be skipped. */
  get threshold(): T | undefined {
    return this.full ? this.items[this.limit - 1] : undefined;
  }

  private compact(): void {
    this.items.sort(this.compare);
    this.items.length = this.limit;
    this.full = true;
  }

  sorted(): T[] {
    this.items.sort(this.compare);
    if (this.items.length > this.limit) this.items.length = this.limit;
    return this.items;
  }
}
