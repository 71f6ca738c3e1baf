/** What a screen is handed: where to draw, and the heading maker that takes focus after a navigation. */
export interface ScreenContext {
  main: HTMLElement;
  /** The screen's `<h1>`; it takes the focus when the screen opens, so keyboard users start there. */
  title(text: string): HTMLHeadingElement;
  /** The part of the location after the screen's own name: `['wbh_…']` for `#/webhooks/wbh_…`. */
  rest: string[];
}

/** Draws a screen; returns what stops its timers when the user leaves it. */
export type Screen = (context: ScreenContext) => () => void;
