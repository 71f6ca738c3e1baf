import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type ClientInfo, audited, newPersonalKey, verifyTrail } from '../../src/domain/audit-trail.js';
import { erasePersonalData } from '../../src/domain/signing-rules.js';
import type { AgreementRecord } from '../../src/records.js';
import { agreementRecord } from '../conformance/fixtures.js';

/**
 * The audit trail's chain and erasure: a trail with a personal key commits to IPs, user agents and
 * details through keyed digests, so it still verifies once they are erased, and an edit of one
 * of them while kept breaks it; a trail made before the key existed verifies after erasure by its
 * links where its entries' hashes covered what is gone.
 */

const NOW = new Date('2026-03-01T10:00:00Z');
const SIGNER: ClientInfo = { ip: '198.51.100.23', userAgent: 'Private/2.0' };

/** A declined agreement: created, viewed and declined with the signer's IP, agent and reason in its trail. */
function declined(personalKey: string | undefined): AgreementRecord {
  const base = agreementRecord(personalKey === undefined ? {} : { personalKey });
  const created = audited(base, NOW, 'created', { actor: 'account:acct_a' });
  const viewed = audited(created, NOW, 'viewed', { actor: base.signers[0]!.id, client: SIGNER });
  const signers = viewed.signers.map((signer, i) =>
    i === 0 ? { ...signer, declinedAt: '2026-03-01T10:00:00+00:00', declineReason: 'not me' } : signer,
  );
  return audited(
    { ...viewed, signers, closedAt: '2026-03-01T10:00:00+00:00', closedReason: 'declined' },
    NOW,
    'declined',
    { actor: base.signers[0]!.id, client: SIGNER, detail: 'not me' },
  );
}

const erase = (record: AgreementRecord) =>
  erasePersonalData(record, NOW, 'account:acct_a', { ip: '192.0.2.1', userAgent: 'host' });
const hashes = (record: AgreementRecord) => record.audit.map((entry) => entry.hash);

test('a keyed trail verifies before and after erasure, every earlier hash kept', () => {
  const record = declined(newPersonalKey());
  assert.ok(verifyTrail(record));
  assert.ok(record.audit.every((entry) => /^[0-9a-f]{64}$/.test(entry.personal ?? '')));
  const erased = erase(record);
  assert.ok(verifyTrail(erased));
  assert.equal(hashes(erased).slice(0, -1), hashes(record));
  assert.is(erased.audit.at(-1)!.action, 'erased');
  assert.is(erased.personalKey, '[erased]', 'the key goes with the data');
  assert.not.ok(JSON.stringify(erased).includes('198.51.100.23'));
  assert.not.ok(JSON.stringify(erased).includes('not me'));
  assert.equal(erase(erased), erased, 'erasing again changes nothing');
});

test('while the key is kept, a personal field edited, or erased by hand, breaks the chain', () => {
  const record = declined(newPersonalKey());
  const edit = (field: 'ip' | 'userAgent' | 'detail', value: string) => ({
    ...record,
    audit: record.audit.map((entry, i) => (i === 2 ? { ...entry, [field]: value } : entry)),
  });
  assert.not.ok(verifyTrail(edit('ip', '203.0.113.1')));
  assert.not.ok(verifyTrail(edit('userAgent', 'Other/1.0')));
  assert.not.ok(verifyTrail(edit('detail', '[erased]')));
  const renamed = { ...record, signers: record.signers.map((signer) => ({ ...signer, email: 'x@example.com' })) };
  assert.not.ok(verifyTrail(renamed), 'an e-mail changed under the trail');
});

test('after erasure, a field that is not personal edited still breaks the chain', () => {
  const erased = erase(declined(newPersonalKey()));
  const moved = {
    ...erased,
    audit: erased.audit.map((entry, i) => (i === 1 ? { ...entry, at: '2020-01-01T00:00:00+00:00' } : entry)),
  };
  assert.not.ok(verifyTrail(moved));
  const renamed = { ...erased, signers: erased.signers.map((signer) => ({ ...signer, firstName: 'Back' })) };
  assert.not.ok(verifyTrail(renamed), 'a name put back after erasure');
});

test('open agreements are refused: void first', () => {
  const open = audited(agreementRecord({ personalKey: newPersonalKey() }), NOW, 'created', { actor: 'account:acct_a' });
  assert.throws(() => erase(open), /still awaiting signatures: void it first/);
});

test('a trail made before the key verifies after erasure, its erased entries held to their links', () => {
  const legacy = declined(undefined);
  assert.ok(legacy.audit.every((entry) => entry.personal === undefined));
  assert.ok(verifyTrail(legacy));
  const erased = erase(legacy);
  assert.ok(verifyTrail(erased));
  assert.equal(hashes(erased).slice(0, -1), hashes(legacy));
  assert.ok(erased.audit.at(-1)!.personal !== undefined, 'entries after erasure commit through digests');
  const unlinked = {
    ...erased,
    audit: erased.audit.map((entry, i) => (i === 1 ? { ...entry, previousHash: '1'.repeat(64) } : entry)),
  };
  assert.not.ok(verifyTrail(unlinked));
});

test.run();
