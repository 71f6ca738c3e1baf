import type { AttemptRecorded } from '../../src/ports.js';

/** What `Storage.recordAttempt` resolves once it recorded the attempt: nothing else to say, or `over`. */
export const recorded = (over: Partial<AttemptRecorded> = {}): AttemptRecorded => ({
  recorded: true,
  disabled: null,
  dueAgain: false,
  ...over,
});

/** What `Storage.recordAttempt` resolves when it changed nothing. */
export const notRecorded: AttemptRecorded = { recorded: false, disabled: null, dueAgain: false };
