import { api } from './api.js';
import { el } from './dom.js';

/**
 * A Download button for the bytes behind `linkPath` (an API route answering `{link, expiresAt}`):
 * on click it asks for a fresh signed link and opens it. The link answers with
 * `Content-Disposition: attachment`, so the browser saves the file and the page stays.
 */
export function downloadButton(
  name: string,
  linkPath: string,
  showError: (error: unknown) => void,
  label = 'Download',
): HTMLButtonElement {
  const button = el('button', { type: 'button', class: 'link-button', 'aria-label': `${label} ${name}` }, label);
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const { link } = await api<{ link: string; expiresAt: string }>('GET', linkPath);
      window.location.assign(link);
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}
