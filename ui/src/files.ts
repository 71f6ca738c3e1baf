import { api, segment } from './api.js';
import { el, errorBox, replace } from './dom.js';
import { size, time } from './format.js';
import type { Screen } from './screen.js';
import type { FileEntry, List } from './types.js';

/**
 * The account's files, one directory at a time. The location holds the path of directory ids from
 * the root (`#/files/fsd_a/fsd_b`), so a link to a directory names its ancestors too: each level is
 * listed to find the names of the breadcrumb.
 */
export const fileScreen: Screen = ({ main, title, rest }) => {
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
        {},
        el('caption', { class: 'visually-hidden' }, 'Entries of this directory: directories first, then files'),
        el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Name'), el('th', { scope: 'col', class: 'num' }, 'Size'), el('th', { scope: 'col' }, 'Created'))),
        table,
      ),
    ),
  );

  async function load() {
    try {
      const levels = await Promise.all([undefined, ...rest].map((id) => list(id)));
      const names = ['Files'];
      for (let i = 1; i < levels.length; i++) {
        const entry = levels[i - 1]!.find((candidate) => candidate.id === rest[i - 1]);
        names.push(entry?.name ?? rest[i - 1]!);
      }
      heading.textContent = names.at(-1)!;
      replace(
        crumbs,
        ...names.map((name, i) =>
          el('li', {}, i === names.length - 1 ? el('span', { 'aria-current': 'page' }, name) : el('a', { href: href(rest.slice(0, i)) }, name)),
        ),
      );
      const entries = levels.at(-1)!;
      if (entries.length === 0) return replace(table, el('tr', {}, el('td', { colspan: 3, class: 'empty' }, 'This directory is empty.')));
      replace(table, ...entries.map((entry) => row(entry)));
    } catch (error) {
      errors.show(error);
    }
  }

  const list = async (directoryId: string | undefined) =>
    (await api<List<FileEntry>>('GET', directoryId === undefined ? '/files' : `/files?directoryId=${segment(directoryId)}`)).data;

  function row(entry: FileEntry): HTMLTableRowElement {
    const name =
      entry.type === 'directory'
        ? el('a', { href: href([...rest, entry.id]), class: 'dir' }, el('span', { 'aria-hidden': 'true' }, '📁 '), entry.name)
        : el('span', { class: 'file', title: entry.mime }, entry.name);
    return el(
      'tr',
      {},
      el('td', {}, name),
      el('td', { class: 'num' }, entry.type === 'directory' ? '—' : size(entry.size)),
      el('td', {}, time(entry.createdAt)),
    );
  }

  void load();
  return () => {};
};

const href = (path: string[]) => '#/files' + path.map((id) => '/' + segment(id)).join('');
