import { el } from './dom.js';
import type { Words } from './words.js';

/** The pad's drawing size in CSS pixels; the bitmap doubles it for sharp lines on dense screens. */
const WIDTH = 480;
const HEIGHT = 160;

export interface SignaturePad {
  node: HTMLElement;
  /** The signature as a PNG data-URL, or `null` while nothing is drawn or typed. */
  value(): string | null;
}

/**
 * A signature, drawn with a pointer (mouse, pen or finger) on a canvas, or typed and set in a script
 * face on the same canvas, which the keyboard alone can do. Either way it leaves as a PNG data-URL.
 */
export function signaturePad(name: string, words: Words): SignaturePad {
  const canvas = el('canvas', {
    class: 'pad',
    width: WIDTH * 2,
    height: HEIGHT * 2,
    'aria-label': words.drawHere,
  });
  const context = canvas.getContext('2d')!;
  context.scale(2, 2);
  context.lineWidth = 2.2;
  context.lineCap = 'round';
  context.lineJoin = 'round';
  context.strokeStyle = '#1b1f24';
  let drawn = false;
  let mode: 'draw' | 'type' = 'draw';

  const typed = el('input', { id: 'typed-signature', type: 'text', autocomplete: 'off', maxlength: 80, value: name });
  const clear = el('button', { type: 'button', class: 'link-button' }, words.clear);
  const drawTab = el('button', { type: 'button', role: 'tab', 'aria-selected': 'true', id: 'tab-draw' }, words.draw);
  const typeTab = el('button', { type: 'button', role: 'tab', 'aria-selected': 'false', id: 'tab-type' }, words.type);
  const typePanel = el(
    'div',
    { class: 'field', hidden: true },
    el('label', { for: 'typed-signature' }, words.typedLabel),
    typed,
  );

  function wipe(): void {
    context.clearRect(0, 0, WIDTH, HEIGHT);
    drawn = false;
  }

  function renderTyped(): void {
    wipe();
    const text = typed.value.trim();
    if (text === '') return;
    context.fillStyle = '#1b1f24';
    context.font = `italic 40px 'Segoe Script', 'Brush Script MT', 'URW Chancery L', cursive`;
    context.textBaseline = 'middle';
    context.fillText(text, 16, HEIGHT / 2, WIDTH - 32);
    drawn = true;
  }

  function select(next: 'draw' | 'type'): void {
    mode = next;
    drawTab.setAttribute('aria-selected', String(next === 'draw'));
    typeTab.setAttribute('aria-selected', String(next === 'type'));
    typePanel.hidden = next !== 'type';
    if (next === 'type') {
      renderTyped();
      typed.focus();
    } else {
      wipe();
    }
  }

  const point = (event: PointerEvent) => {
    const box = canvas.getBoundingClientRect();
    return [
      ((event.clientX - box.left) / box.width) * WIDTH,
      ((event.clientY - box.top) / box.height) * HEIGHT,
    ] as const;
  };
  let down = false;
  canvas.addEventListener('pointerdown', (event) => {
    if (mode !== 'draw') select('draw');
    down = true;
    canvas.setPointerCapture(event.pointerId);
    const [x, y] = point(event);
    context.beginPath();
    context.moveTo(x, y);
    context.lineTo(x + 0.1, y + 0.1);
    context.stroke();
    drawn = true;
    event.preventDefault();
  });
  canvas.addEventListener('pointermove', (event) => {
    if (!down) return;
    const [x, y] = point(event);
    context.lineTo(x, y);
    context.stroke();
  });
  const lift = () => {
    down = false;
  };
  canvas.addEventListener('pointerup', lift);
  canvas.addEventListener('pointercancel', lift);
  clear.addEventListener('click', () => (mode === 'type' ? ((typed.value = ''), renderTyped()) : wipe()));
  drawTab.addEventListener('click', () => select('draw'));
  typeTab.addEventListener('click', () => select('type'));
  typed.addEventListener('input', renderTyped);

  const node = el(
    'div',
    { class: 'signature' },
    el('div', { role: 'tablist', 'aria-label': words.howToSign, class: 'tabs' }, drawTab, typeTab),
    typePanel,
    el('div', { class: 'pad-frame' }, canvas),
    el('div', { class: 'actions' }, clear),
  );
  return { node, value: () => (drawn ? canvas.toDataURL('image/png') : null) };
}
