import type { Storage } from '../../src/ports.js';
import type { DeliveryRecord } from '../../src/records.js';

/** Every delivery of the webhook, newest first: the store's log read page by page to its end. */
export async function everyDelivery(storage: Storage, accountId: string, webhookId: string): Promise<DeliveryRecord[]> {
  const all: DeliveryRecord[] = [];
  let page = await storage.listDeliveries(accountId, webhookId, { limit: 500 });
  all.push(...page.deliveries);
  while (page.next !== null) {
    page = await storage.listDeliveries(accountId, webhookId, { limit: 500, after: page.next });
    all.push(...page.deliveries);
  }
  return all;
}
