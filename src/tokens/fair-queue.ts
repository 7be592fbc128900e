/**
 * Deficit round robin over tenants (count-pool.ts, count-worker.ts): each tenant with work queued
 * gets `quantum` units (characters) per turn, and a turn takes that tenant's items in order while
 * they fit. A tenant with a backlog of megabytes gets a chunk per turn like any other; one that
 * sends less gets what it sends. With quantum 0, a turn takes one item.
 */
export class FairQueue<T> {
  private readonly tenants = new Map<string, Tenant<T>>();
  /** Tenants with items queued, in turn order. */
  private readonly ring: Tenant<T>[] = [];
  private cursor = 0;

  constructor(
    private readonly quantum: number,
    private readonly sizeOf: (item: T) => number,
  ) {}

  get empty(): boolean {
    return this.ring.length === 0;
  }

  push(tenant: string, item: T, front = false): void {
    let t = this.tenants.get(tenant);
    if (!t) {
      t = { key: tenant, items: new Deque<T>(), deficit: 0 };
      this.tenants.set(tenant, t);
    }
    if (t.items.length === 0) this.ring.push(t);
    if (front) t.items.pushFront(item);
    else t.items.push(item);
  }

  /** The next tenant's turn: its items, at least one, at most `quantum` units (or one item). */
  take(): T[] {
    if (this.ring.length === 0) return [];
    if (this.cursor >= this.ring.length) this.cursor = 0;
    const t = this.ring[this.cursor];
    const taken: T[] = [];
    if (this.quantum === 0) taken.push(t.items.shift());
    else {
      t.deficit = Math.min(t.deficit + this.quantum, 2 * this.quantum);
      let units = 0;
      while (t.items.length > 0) {
        const next = this.sizeOf(t.items.peek());
        if (taken.length > 0 && (next > t.deficit || units + next > this.quantum)) break;
        taken.push(t.items.shift());
        t.deficit -= next;
        units += next;
      }
    }
    if (t.items.length === 0) this.leave(t);
    else this.cursor++;
    return taken;
  }

  /** Removes the items `drop` says to; answers them. */
  remove(tenant: string, drop: (item: T) => boolean): T[] {
    const t = this.tenants.get(tenant);
    if (!t) return [];
    const removed = t.items.remove(drop);
    if (t.items.length === 0) this.leave(t);
    return removed;
  }

  /** Every item queued (the queue is then empty). */
  clear(): T[] {
    const all = this.ring.flatMap((t) => t.items.remove(() => true));
    this.ring.length = 0;
    this.tenants.clear();
    this.cursor = 0;
    return all;
  }

  private leave(t: Tenant<T>): void {
    const i = this.ring.indexOf(t);
    this.ring.splice(i, 1);
    if (i < this.cursor) this.cursor--;
    this.tenants.delete(t.key);
  }
}

interface Tenant<T> {
  key: string;
  items: Deque<T>;
  deficit: number;
}

/** O(1) takes from the front and pushes at either end (an import queues 100k texts). */
class Deque<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }
  peek(): T {
    return this.items[this.head] as T;
  }
  push(item: T): void {
    this.items.push(item);
  }
  pushFront(item: T): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }
  shift(): T {
    const item = this.items[this.head] as T;
    this.items[this.head++] = undefined;
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
  remove(drop: (item: T) => boolean): T[] {
    const removed: T[] = [];
    const kept: T[] = [];
    for (let i = this.head; i < this.items.length; i++) (drop(this.items[i] as T) ? removed : kept).push(this.items[i] as T);
    this.items = kept;
    this.head = 0;
    return removed;
  }
}
