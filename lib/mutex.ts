/**
 * Runs async sections one at a time, in arrival order. Each section runs in
 * its caller's own async context (the caller awaits its turn), which matters
 * in a Durable Object: calls a section makes are attributed to the event
 * that entered it, not to whichever event happened to run before.
 */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  async run<T>(section: () => Promise<T> | T): Promise<T> {
    const previous = this.tail;
    let release: () => void = () => undefined;
    this.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    try {
      return await section();
    } finally {
      release();
    }
  }
}
