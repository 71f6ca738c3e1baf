/**
 * A whole-number query parameter (`limit`) as the services read it: digits only, or NaN, which the
 * service refuses by name. `Number` alone would take ' 5', '0x10' and '1e1'.
 */
export const wholeNumber = (text: string): number => (/^[0-9]{1,6}$/.test(text) ? Number(text) : Number.NaN);
