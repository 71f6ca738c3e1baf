/** The API's shapes, as `docs/http-api.md` and `docs/webhooks.md` give them: what the page reads. */
export interface Webhook {
  id: string;
  type: string;
  url: string;
  secret: string;
  createdAt: string;
}

export interface WebhookHealth {
  status: 'enabled' | 'disabled';
  disabledReason: 'gone' | 'failing' | 'manual' | null;
  disabledAt: string | null;
  failingSince: string | null;
  lastSuccessAt: string | null;
  lastAttemptAt: string | null;
  consecutiveFailures: number;
}

export interface DeliveryAttempt {
  at: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface Delivery {
  id: string;
  webhookId: string;
  eventId: string;
  status: 'pending' | 'succeeded' | 'failed' | 'cancelled';
  attempts: DeliveryAttempt[];
  attemptCount: number;
  nextAttemptAt: string | null;
  createdAt: string;
}

export interface FileEntry {
  id: string;
  type: 'file' | 'directory';
  name: string;
  size: number;
  mime: string;
  fileShareId: string | null;
  createdAt: string;
}

export interface List<T> {
  data: T[];
}
