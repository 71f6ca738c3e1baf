/**
 * The page's only way to the portal: the `/v1` API with the key the user signed in with, as
 * `Authorization: Bearer`. The page can do nothing the key cannot.
 */
const KEY_ITEM = 'customer-portal.api-key';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function meta(name: string): string {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? '';
}

/** The API root, as the server wrote it into the page (relative to the page, so a mount prefix is kept). */
const apiRoot = new URL(meta('portal-api') || '../v1', document.baseURI).href.replace(/\/+$/, '');

export function eventTypes(): string[] {
  try {
    const types: unknown = JSON.parse(meta('portal-event-types') || '[]');
    return Array.isArray(types) ? types.filter((type): type is string => typeof type === 'string') : [];
  } catch {
    return [];
  }
}

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY_ITEM),
  signIn: (key: string) => sessionStorage.setItem(KEY_ITEM, key),
  signOut: () => sessionStorage.removeItem(KEY_ITEM),
};

/** Called when the API answers 401: the key is gone or was never valid. */
let onUnauthorized: (message: string) => void = () => {};
export function whenUnauthorized(handler: (message: string) => void): void {
  onUnauthorized = handler;
}

/** Calls the API; resolves the parsed JSON (`undefined` for a 204), rejects an `ApiError` carrying the API's `message`. */
export async function api<T>(method: string, path: string, body?: unknown, key = session.key()): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (key !== null) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(apiRoot + path, {
      method,
      headers,
      body: body === undefined ? null : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (error) {
    throw new ApiError(0, `The portal could not be reached (${error instanceof Error ? error.message : String(error)}).`);
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const message =
      typeof parsed === 'object' && parsed !== null && typeof (parsed as { message?: unknown }).message === 'string'
        ? (parsed as { message: string }).message
        : `The portal answered ${response.status} ${response.statusText}.`;
    const error = new ApiError(response.status, message);
    if (response.status === 401 && key === session.key()) onUnauthorized(message);
    throw error;
  }
  return parsed as T;
}

/** Fetches bytes the API answers to the signed-in key (a certificate's PDF); rejects an `ApiError` with the API's message. */
export async function download(path: string): Promise<Blob> {
  const key = session.key();
  const response = await fetch(apiRoot + path, { headers: key === null ? {} : { Authorization: `Bearer ${key}` }, credentials: 'omit', cache: 'no-store' }).catch((error: unknown) => {
    throw new ApiError(0, `The portal could not be reached (${error instanceof Error ? error.message : String(error)}).`);
  });
  if (!response.ok) {
    const parsed = (await response.json().catch(() => undefined)) as { message?: string } | undefined;
    throw new ApiError(response.status, parsed?.message ?? `The portal answered ${response.status} ${response.statusText}.`);
  }
  return response.blob();
}

/** The path segment for an id taken from a link or a record. */
export const segment = (id: string) => encodeURIComponent(id);
