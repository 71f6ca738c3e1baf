import { ApiError, api, segment } from './api.js';
import { isId, showNotFound } from './not-found.js';
import { downloadButton } from './download.js';
import { el, errorBox, replace } from './dom.js';
import { size, time } from './format.js';
import type { Screen } from './screen.js';
import type { FileEntry, List } from './types.js';

/**
 * The account's files as a tree: a directory expands in place (its entries listed below it,
 * indented) and collapses again, by its button, with Enter or Space, or with the arrow keys
 * (→ expands, ← collapses). The location holds the path of directory ids from the root
 * (`#/files/fsd_a/fsd_b`), so a directory also opens as a screen of its own ("Open"), whose
 * breadcrumb names its ancestors: each level is listed to find their names.
 */
export const fileScreen: Screen = ({ main, title, rest }) => {
  if (!rest.every((id) => isId('fsd', id))) {
    showNotFound({ main, title }, 'There is no such directory in this account.', { href: '#/files', label: '← Files' });
    return () => {};
  }
  const errors = errorBox();
  const crumbs = el('ol', { class: 'crumbs' });
  const table = el('tbody');
  const heading = title('Files');
  replace(
    main,
    heading,
    el('nav', { 'aria-label': 'Directory path' }, crumbs),
    errors.node,
    el(
      'div',
      { class: 'table' },
      el(
        'table',
        { class: 'tree' },
        el(
          'caption',
          { class: 'visually-hidden' },
          'Entries of this directory: directories first, then files. A directory expands in place.',
        ),
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            el('th', { scope: 'col' }, 'Name'),
            el('th', { scope: 'col', class: 'num' }, 'Size'),
            el('th', { scope: 'col' }, 'Created'),
            el('th', { scope: 'col' }, el('span', { class: 'visually-hidden' }, 'Actions')),
          ),
        ),
        table,
      ),
    ),
  );

  let stopped = false;
  async function load() {
    try {
      const levels = await Promise.all([undefined, ...rest].map((id) => list(id)));
      if (stopped) return;
      const names = ['Files'];
      for (let i = 1; i < levels.length; i++) {
        const entry = levels[i - 1]!.find((candidate) => candidate.id === rest[i - 1]);
        names.push(entry?.name ?? rest[i - 1]!);
      }
      heading.textContent = names.at(-1)!;
      replace(
        crumbs,
        ...names.map((name, i) =>
          el(
            'li',
            {},
            i === names.length - 1
              ? el('span', { 'aria-current': 'page' }, name)
              : el('a', { href: href(rest.slice(0, i)) }, name),
          ),
        ),
      );
      replace(table, ...rows(levels.at(-1)!, rest, 0));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && rest.length > 0) {
        return showNotFound({ main, title }, 'There is no such directory in this account.', {
          href: '#/files',
          label: '← Files',
        });
      }
      errors.show(error);
    }
  }

  const list = async (directoryId: string | undefined) =>
    (
      await api<List<FileEntry>>(
        'GET',
        directoryId === undefined ? '/files' : `/files?directoryId=${segment(directoryId)}`,
      )
    ).data;

  /** The rows of a directory's entries at `depth`; `path` is the directory's own path of ids. */
  function rows(entries: FileEntry[], path: string[], depth: number): HTMLTableRowElement[] {
    if (entries.length === 0) {
      return [
        indented(
          el(
            'tr',
            { class: 'empty-row' },
            el('td', { colspan: 4, class: 'empty' }, depth === 0 ? 'This directory is empty.' : 'Empty directory.'),
          ),
          depth,
        ),
      ];
    }
    return entries.map((entry) =>
      entry.type === 'directory' ? directoryRow(entry, [...path, entry.id], depth) : fileRow(entry, depth),
    );
  }

  function fileRow(entry: FileEntry, depth: number): HTMLTableRowElement {
    return indented(
      el(
        'tr',
        { 'data-id': entry.id },
        el('td', {}, el('span', { class: 'file', title: entry.mime }, entry.name)),
        el('td', { class: 'num' }, size(entry.size)),
        el('td', {}, time(entry.createdAt)),
        el(
          'td',
          { class: 'row-actions' },
          downloadButton(entry.name, `/files/${segment(entry.id)}/download`, errors.show),
        ),
      ),
      depth,
    );
  }

  function directoryRow(entry: FileEntry, path: string[], depth: number): HTMLTableRowElement {
    const toggle = el(
      'button',
      { type: 'button', class: 'toggle', 'aria-expanded': 'false' },
      el('span', { class: 'chevron', 'aria-hidden': 'true' }),
      entry.name,
    );
    const open = el('a', { href: href(path), class: 'open', 'aria-label': `Open ${entry.name}` }, 'Open');
    const row = indented(
      el(
        'tr',
        { class: 'dir', 'data-id': entry.id },
        el('td', {}, el('span', { class: 'dir-name' }, toggle, open)),
        el('td', { class: 'num' }, '—'),
        el('td', {}, time(entry.createdAt)),
        el('td', {}),
      ),
      depth,
    );
    let busy = false;
    const expanded = () => toggle.getAttribute('aria-expanded') === 'true';

    async function expand() {
      if (expanded() || busy) return;
      busy = true;
      toggle.setAttribute('aria-busy', 'true');
      try {
        const children = rows(await list(entry.id), path, depth + 1);
        if (!row.isConnected) return;
        row.after(...children);
        toggle.setAttribute('aria-expanded', 'true');
        errors.clear();
      } catch (error) {
        errors.show(error);
      } finally {
        busy = false;
        toggle.removeAttribute('aria-busy');
      }
    }

    /** Removes every row below this one that is deeper: its entries, and theirs when expanded. */
    function collapse() {
      if (!expanded()) return;
      let next = row.nextElementSibling as HTMLTableRowElement | null;
      while (next !== null && Number(next.dataset.depth) > depth) {
        const after = next.nextElementSibling as HTMLTableRowElement | null;
        next.remove();
        next = after;
      }
      toggle.setAttribute('aria-expanded', 'false');
    }

    toggle.addEventListener('click', () => (expanded() ? collapse() : void expand()));
    toggle.addEventListener('keydown', (event) => {
      if (event.key === 'ArrowRight') void expand();
      else if (event.key === 'ArrowLeft') collapse();
      else return;
      event.preventDefault();
    });
    return row;
  }

  void load();
  return () => {
    stopped = true;
  };
};

/** A row at `depth` in the tree: the depth is kept for collapsing, and indents the name (through CSSOM, which the CSP allows). */
function indented(row: HTMLTableRowElement, depth: number): HTMLTableRowElement {
  row.dataset.depth = String(depth);
  if (depth > 0) row.style.setProperty('--depth', String(depth));
  return row;
}

const href = (path: string[]) => '#/files' + path.map((id) => '/' + segment(id)).join('');
