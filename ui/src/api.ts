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

/** A JSON array of strings the server wrote into the page; `[]` when absent or malformed. */
function metaList(name: string): string[] {
  try {
    const list: unknown = JSON.parse(meta(name) || '[]');
    return Array.isArray(list) ? list.filter((item): item is string => typeof item === 'string') : [];
  } catch {
    return [];
  }
}

export const eventTypes = (): string[] => metaList('portal-event-types');

/** The schemes a webhook URL may have here: `http`, `https`, and those of the destinations the host configured. */
export const urlSchemes = (): string[] => {
  const schemes = metaList('portal-schemes');
  return schemes.length === 0 ? ['http', 'https'] : schemes;
};

/** A portal session's token from the link the page was opened with: kept in this page's memory only. */
let sessionToken: string | null = null;
/** Whether that session may only read (`readOnly=1` beside the token). */
let sessionReadOnly = false;

export const session = {
  key: (): string | null => sessionToken ?? sessionStorage.getItem(KEY_ITEM),
  signIn: (key: string) => sessionStorage.setItem(KEY_ITEM, key),
  /** Opens the page with a portal session's token (`#session=…` of a link the host handed out). */
  useSessionToken: (token: string, readOnly: boolean) => {
    sessionToken = token;
    sessionReadOnly = readOnly;
  },
  /** Whether the page runs on a portal session's token rather than an API key. */
  onSession: () => sessionToken !== null,
  /**
   * Whether the page offers controls that send anything but a GET: not on a read-only session,
   * whose every such request the API refuses with 403 (the API stays the guard; this spares the
   * person buttons that can only fail).
   */
  mayChange: () => sessionToken === null || !sessionReadOnly,
  signOut: () => {
    sessionToken = null;
    sessionReadOnly = false;
    sessionStorage.removeItem(KEY_ITEM);
  },
};

/** Called when the API answers 401: the key is gone or was never valid. */
let onUnauthorized: (message: string) => void = () => {};
export function whenUnauthorized(handler: (message: string) => void): void {
  onUnauthorized = handler;
}

/**
 * One request to the API with the key: resolves the response when it is a success; rejects an
 * `ApiError` carrying the API's `message` otherwise (a 401 of the signed-in key also signs out).
 */
async function request(method: string, path: string, body: unknown, key: string | null): Promise<Response> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (key !== null) headers.Authorization = `Bearer ${key}`;
  // A file goes as its bytes (a PDF to verify); anything else as JSON.
  if (body instanceof Blob) headers['Content-Type'] = body.type || 'application/pdf';
  else if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(apiRoot + path, {
      method,
      headers,
      body: body === undefined ? null : body instanceof Blob ? body : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (error) {
    throw new ApiError(
      0,
      `The portal could not be reached (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
  if (response.ok) return response;
  const parsed = (await response.json().catch(() => undefined)) as unknown;
  const message =
    typeof parsed === 'object' && parsed !== null && typeof (parsed as { message?: unknown }).message === 'string'
      ? (parsed as { message: string }).message
      : `The portal answered ${response.status} ${response.statusText}.`;
  if (response.status === 401 && key === session.key()) onUnauthorized(message);
  throw new ApiError(response.status, message);
}

/** Calls the API; resolves the parsed JSON (`undefined` for a 204), rejects an `ApiError` carrying the API's `message`. */
export async function api<T>(method: string, path: string, body?: unknown, key = session.key()): Promise<T> {
  const text = await (await request(method, path, body, key)).text();
  try {
    return (text === '' ? undefined : JSON.parse(text)) as T;
  } catch {
    return undefined as T;
  }
}

/** Fetches bytes the API answers to the signed-in key (a certificate's PDF), as `api` does JSON. */
export async function download(path: string): Promise<Blob> {
  return (await request('GET', path, undefined, session.key())).blob();
}

/** The path segment for an id taken from a link or a record. */
export const segment = (id: string) => encodeURIComponent(id);
