import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import type { PortalSessionRecord } from '../../src/records.js';
import { reopenable } from './reopen.js';
import type { StorageFactory } from './types.js';
import { withStorage } from './with-storage.js';

const sessionOf = (overrides: Partial<PortalSessionRecord> = {}): PortalSessionRecord => ({
  id: 'pts_AAAAAAAAAAAAAAAAAAAAAA',
  accountId: 'acct_a',
  secretHash: 'a'.repeat(64),
  scopes: ['webhooks', 'files'],
  readOnly: true,
  createdAt: '2026-01-01T00:00:00+00:00',
  expiresAt: '2026-01-01T01:00:00+00:00',
  revokedAt: null,
  ...overrides,
});

export function sessionStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'sessions: a stored session reads back whole by id alone; an unknown id is null; a taken id is refused',
    withStorage(factory, async (storage) => {
      const session = sessionOf();
      await storage.insertPortalSession(session);
      await storage.insertPortalSession(sessionOf({ id: 'pts_BBBBBBBBBBBBBBBBBBBBBB', scopes: ['agreements'] }));
      assert.equal(await storage.getPortalSession(session.id), session);
      assert.equal((await storage.getPortalSession('pts_BBBBBBBBBBBBBBBBBBBBBB'))?.scopes, ['agreements']);
      assert.is(await storage.getPortalSession('pts_CCCCCCCCCCCCCCCCCCCCCC'), null);
      try {
        await storage.insertPortalSession(sessionOf({ secretHash: 'b'.repeat(64) }));
        assert.unreachable('a second session with the same id was stored');
      } catch (error) {
        assert.ok(isPortalError(error, 'RECORD_EXISTS'), String(error));
      }
      assert.is((await storage.getPortalSession(session.id))?.secretHash, 'a'.repeat(64), 'the first one is kept');
    }),
  );

  test(
    'sessions: revoked once, at the first time; another account revokes nothing; an unknown id is null',
    withStorage(factory, async (storage) => {
      const session = sessionOf();
      await storage.insertPortalSession(session);
      assert.is(await storage.revokePortalSession('acct_b', session.id, '2026-01-01T00:10:00+00:00'), null);
      assert.is((await storage.getPortalSession(session.id))?.revokedAt, null, "another account's revoke changed it");
      assert.is(await storage.revokePortalSession('acct_a', session.id, '2026-01-01T00:20:00+00:00'), true);
      assert.is(await storage.revokePortalSession('acct_a', session.id, '2026-01-01T00:30:00+00:00'), false);
      assert.equal(await storage.getPortalSession(session.id), { ...session, revokedAt: '2026-01-01T00:20:00+00:00' });
      assert.is(
        await storage.revokePortalSession('acct_a', 'pts_CCCCCCCCCCCCCCCCCCCCCC', '2026-01-01T00:30:00+00:00'),
        null,
      );
    }),
  );

  test(
    'sessions: the sweep removes expired ones (of every account, up to its limit) and keeps the others',
    withStorage(factory, async (storage) => {
      const ids = ['pts_AAAAAAAAAAAAAAAAAAAAA1', 'pts_AAAAAAAAAAAAAAAAAAAAA2', 'pts_AAAAAAAAAAAAAAAAAAAAA3'];
      await storage.insertPortalSession(sessionOf({ id: ids[0], expiresAt: '2026-01-01T00:30:00+00:00' }));
      await storage.insertPortalSession(
        sessionOf({ id: ids[1], accountId: 'acct_b', expiresAt: '2026-01-01T00:40:00+00:00' }),
      );
      await storage.insertPortalSession(sessionOf({ id: ids[2], expiresAt: '2026-01-01T02:00:00+00:00' }));
      assert.is(await storage.sweepPortalSessions('2026-01-01T00:29:59+00:00', 10), 0);
      assert.is(await storage.sweepPortalSessions('2026-01-01T01:00:00+00:00', 1), 1);
      assert.is(await storage.sweepPortalSessions('2026-01-01T01:00:00+00:00', 10), 1);
      assert.equal(await Promise.all(ids.map(async (id) => (await storage.getPortalSession(id)) !== null)), [
        false,
        false,
        true,
      ]);
    }),
  );

  test(
    "sessions: with maxLive, an account holding that many live ones is refused (false, nothing stored); revoked, expired and other accounts' do not count",
    withStorage(factory, async (storage, { db }) => {
      const at = (time: string) => `2026-01-01T${time}+00:00`;
      const id = (n: number) => `pts_AAAAAAAAAAAAAAAAAAAAA${n}`;
      const limit = { maxLive: 2 };
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(1) }), limit), true);
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(2), expiresAt: at('00:30:00') }), limit), true);
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(3) }), limit), false);
      assert.is(await db.session(id(3)), null, 'the refused session is not stored');
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(4), accountId: 'acct_b' }), limit), true);

      await storage.revokePortalSession('acct_a', id(1), at('00:10:00'));
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(3) }), limit), true, 'a revoked one is not live');
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(5), createdAt: at('00:29:59') }), limit), false);
      // Expired at its expiresAt, as a token is: at 00:30 only id(3) is live.
      const later = sessionOf({ id: id(5), createdAt: at('00:30:00'), expiresAt: at('01:30:00') });
      assert.is(await storage.insertPortalSession(later, limit), true, 'an expired one is not live');
      assert.equal(await db.session(id(5)), later);
      assert.is(await storage.insertPortalSession(sessionOf({ id: id(6), createdAt: at('00:30:00') }), limit), false);
      assert.is(
        await storage.insertPortalSession(sessionOf({ id: id(6) }), {}),
        true,
        'without maxLive nothing is counted',
      );
    }),
  );

  test(
    'sessions: concurrent inserts never pass maxLive together',
    withStorage(factory, async (storage) => {
      const ids = Array.from({ length: 12 }, (_, i) => `pts_AAAAAAAAAAAAAAAAAAAA${String(i).padStart(2, '0')}`);
      const stored = await Promise.all(ids.map((id) => storage.insertPortalSession(sessionOf({ id }), { maxLive: 5 })));
      assert.is(stored.filter(Boolean).length, 5);
      const found = await Promise.all(ids.map((id) => storage.getPortalSession(id)));
      assert.equal(
        found.map((session) => session !== null),
        stored,
        'stored exactly the ones that answered true',
      );
    }),
  );

  reopenable(test, factory)(
    'sessions: a session and its revocation survive a reopen, and so does what maxLive counts',
    withStorage(factory, async (storage, { swap }) => {
      const session = sessionOf();
      await storage.insertPortalSession(session);
      await storage.insertPortalSession(sessionOf({ id: 'pts_BBBBBBBBBBBBBBBBBBBBBB' }));
      await storage.revokePortalSession('acct_a', 'pts_BBBBBBBBBBBBBBBBBBBBBB', '2026-01-01T00:20:00+00:00');
      const reopened = await swap();
      assert.equal(await reopened.getPortalSession(session.id), session);
      assert.is(
        (await reopened.getPortalSession('pts_BBBBBBBBBBBBBBBBBBBBBB'))?.revokedAt,
        '2026-01-01T00:20:00+00:00',
      );
      const third = sessionOf({ id: 'pts_CCCCCCCCCCCCCCCCCCCCCC' });
      assert.is(await reopened.insertPortalSession(third, { maxLive: 1 }), false, 'the live one still counts');
      assert.is(await reopened.insertPortalSession(third, { maxLive: 2 }), true, 'the revoked one does not');
    }),
  );
}
