export { httpTransport, MAX_RESPONSE_BYTES, type HttpTransportOptions } from './http-transport.js';
export { classifyAddress, refusalOf, type AddressKind } from './address-guard.js';
