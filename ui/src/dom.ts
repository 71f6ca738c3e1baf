/**
 * The page builds every node with `createElement` and `textContent`: data from the API (webhook
 * URLs, file names, error messages) is never parsed as HTML.
 */
export type Child = Node | string | null | undefined | false;

export interface Props {
  [name: string]: string | number | boolean | ((event: Event) => void) | undefined;
}

/** `el('button', { type: 'button', onclick }, 'Send')`: attributes, `on…` listeners, then children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') node.addEventListener(name.slice(2), value);
    else if (value === true) node.setAttribute(name, '');
    else node.setAttribute(name, String(value));
  }
  append(node, ...children);
  return node;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

/** Replaces every child of `parent`. */
export function replace(parent: Node, ...children: Child[]): void {
  parent.textContent = '';
  append(parent, ...children);
}

/** An alert region that shows an error's message; empty while there is none. */
export function errorBox(): { node: HTMLElement; show(error: unknown): void; clear(): void } {
  const node = el('p', { class: 'error', role: 'alert', hidden: true });
  return {
    node,
    show(error) {
      node.textContent = error instanceof Error ? error.message : String(error);
      node.hidden = false;
    },
    clear() {
      node.textContent = '';
      node.hidden = true;
    },
  };
}

/** A `<dl>` of label → value rows; a `null` value is left out. */
export function details(rows: [string, Child][]): HTMLDListElement {
  const list = el('dl', { class: 'details' });
  for (const [label, value] of rows) {
    if (value === null || value === undefined) continue;
    append(list, el('div', {}, el('dt', {}, label), el('dd', {}, value)));
  }
  return list;
}

/**
 * Runs `run` with `button` disabled meanwhile; its error is shown in `errors`, which is cleared when
 * it succeeds. For the panels' actions: a second press while one runs does nothing.
 */
export async function whileBusy(
  button: HTMLButtonElement,
  errors: { show(error: unknown): void; clear(): void },
  run: () => Promise<void>,
): Promise<void> {
  button.disabled = true;
  try {
    await run();
    errors.clear();
  } catch (error) {
    errors.show(error);
  } finally {
    button.disabled = false;
  }
}

/**
 * Shows stored values in a field, unless it holds an edit of the one shown before: a refresh of the
 * screen never overwrites what is being typed.
 */
export function keptEdit(input: { value: string }): (stored: string) => void {
  let shown: string | undefined;
  return (stored) => {
    if (shown === undefined || input.value === shown) input.value = stored;
    shown = stored;
  };
}
