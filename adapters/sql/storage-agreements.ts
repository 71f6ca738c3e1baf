import type { Storage } from '../../src/ports.js';
import type {
  AgreementDocument,
  AgreementEventSigner,
  AgreementRecord,
  AgreementSignerRecord,
  AgreementStatus,
  AgreementSummaryRecord,
  AuditEntry,
  ClosedReason,
  EventRecord,
  SigningOrder,
} from '../../src/records.js';
import {
  TRAIL_APPEND_ONLY,
  completionDueAt,
  documentOf,
  extendsTrail,
  identificationOf,
  mailDueAt,
  redactsTrail,
} from '../../src/records.js';
import type { AgreementDocumentRecord, CompletionRecord, PendingMail } from '../../src/records.js';
import type { Db, Queryable, Row } from './client.js';
import type { Names } from './schema.js';
import { atomOf } from './schema.js';
import type { IdempotencyKeys } from './storage-idempotency.js';
import type { Outbox } from './outbox/index.js';

export type AgreementMethods = Pick<
  Storage,
  | 'insertAgreement'
  | 'getAgreement'
  | 'findSignedCopy'
  | 'deleteAgreement'
  | 'listAgreements'
  | 'updateAgreement'
  | 'eraseAgreement'
  | 'agreementsDue'
>;

/**
 * An agreement is four tables (the agreement, its signers, its documents, its audit trail) written
 * in one transaction and read in one statement, so a reader never sees half of an update. The trail
 * is append-only: an update inserts the entries past those stored, and never rewrites one.
 */
export function createAgreements(db: Db, { table }: Names, outbox: Outbox, keys: IdempotencyKeys): AgreementMethods {
  const signingColumns = `a.signing_order, ${atomOf('a.expires_at')} AS expires_at, ${atomOf('a.closed_at')} AS closed_at, a.closed_reason`;
  const signerSteps = `'viewedAt', ${atomOf('s.viewed_at')}, 'declinedAt', ${atomOf('s.declined_at')}, 'declineReason', s.decline_reason`;
  // The signers and documents come back as JSON text built by the server, in position order.
  const select = `SELECT a.id, a.account_id, a.name, a.status, a.signer_name, a.signer_signature,
      a.signer_signature_hash, ${atomOf('a.created_at')} AS created_at, ${signingColumns},
      ${atomOf('a.next_reminder_at')} AS next_reminder_at, a.audit_head, a.audit_length, a.mail, a.completion,
      a.personal_key, a.locale,
      (SELECT coalesce(json_agg(json_build_object(
          'id', s.id, 'firstName', s.first_name, 'lastName', s.last_name, 'email', s.email,
          'shouldIdentify', s.should_identify, 'signature', s.signature, 'signatureHash', s.signature_hash,
          'signedAt', ${atomOf('s.signed_at')}, ${signerSteps}, 'signingLinkId', s.signing_link_id,
          'identity', s.identity::json) ORDER BY s.position), '[]')::text
        FROM ${table('agreement_signers')} AS s WHERE s.agreement_id = a.id) AS signers,
      (SELECT coalesce(json_agg(t.entry ORDER BY t.position), '[]')::text
        FROM (SELECT position, entry::json AS entry FROM ${table('agreement_audit')} WHERE agreement_id = a.id) AS t) AS audit,
      (SELECT coalesce(json_agg(json_build_object(
          'id', d.id, 'documentName', d.document_name, 'fileSize', d.file_size, 'fileHash', d.file_hash,
          'signedFileHash', d.signed_file_hash, 'signedFileKey', d.signed_file_key, 'fields', d.fields::json)
          ORDER BY d.position), '[]')::text
        FROM ${table('agreement_documents')} AS d WHERE d.agreement_id = a.id) AS documents
    FROM ${table('agreements')} AS a
    WHERE a.account_id = $1::text AND a.id = $2::text`;
  // A page: the images (signer_signature, each signer's signature) are never read. Newest first,
  // from just before the cursor's (created_at, seq).
  const summaryColumns = `a.id, a.account_id, a.name, a.status, a.signer_name, a.signer_signature_hash,
      ${atomOf('a.created_at')} AS created_at, ${signingColumns},
      (SELECT coalesce(json_agg(json_build_object(
          'id', s.id, 'firstName', s.first_name, 'lastName', s.last_name, 'email', s.email,
          'shouldIdentify', s.should_identify, 'signatureHash', s.signature_hash,
          'signedAt', ${atomOf('s.signed_at')}, ${signerSteps}, 'signingLinkId', s.signing_link_id,
          'identity', s.identity::json) ORDER BY s.position), '[]')::text
        FROM ${table('agreement_signers')} AS s WHERE s.agreement_id = a.id) AS signers,
      (SELECT coalesce(json_agg(json_build_object(
          'id', d.id, 'documentName', d.document_name, 'fileSize', d.file_size, 'fileHash', d.file_hash,
          'signedFileHash', d.signed_file_hash)
          ORDER BY d.position), '[]')::text
        FROM ${table('agreement_documents')} AS d WHERE d.agreement_id = a.id) AS documents`;
  // Its signers, documents and trail go with it (ON DELETE CASCADE).
  const deleteAgreement = `DELETE FROM ${table('agreements')} WHERE account_id = $1::text AND id = $2::text RETURNING id`;
  // A completed copy by its hash, for /verify: the partial index on signed_file_hash, then the account.
  const signedCopy = `SELECT d.agreement_id, d.id FROM ${table('agreement_documents')} AS d
    JOIN ${table('agreements')} AS a ON a.id = d.agreement_id
    WHERE d.signed_file_hash = $2::text AND a.account_id = $1::text LIMIT 1`;
  const cursorKnown = `SELECT 1 FROM ${table('agreements')} WHERE account_id = $1::text AND id = $2::text`;
  const firstPage = `SELECT ${summaryColumns} FROM ${table('agreements')} AS a
    WHERE a.account_id = $1::text ORDER BY a.created_at DESC, a.seq DESC LIMIT $2::int`;
  // The cursor's row is read in the statement (an init plan): its created_at goes nowhere through a driver's dates.
  const pageAfter = `SELECT ${summaryColumns} FROM ${table('agreements')} AS a
    WHERE a.account_id = $1::text
      AND (a.created_at, a.seq) < (SELECT c.created_at, c.seq FROM ${table('agreements')} AS c WHERE c.id = $3::text)
    ORDER BY a.created_at DESC, a.seq DESC LIMIT $2::int`;
  // Locking and reading are two statements on purpose. In READ COMMITTED a statement that waited
  // for a row lock re-reads only the locked row, while its subqueries (the signers) keep the
  // snapshot taken before the wait: one statement would hand `change` stale signers and lose the
  // other update. The read after the lock takes a fresh snapshot.
  const lock = `SELECT id FROM ${table('agreements')} WHERE account_id = $1::text AND id = $2::text FOR UPDATE`;
  const insert = `INSERT INTO ${table('agreements')}
    (id, account_id, name, status, signer_name, signer_signature, signer_signature_hash, created_at,
     signing_order, expires_at, closed_at, closed_reason, next_reminder_at, audit_head, audit_length, mail, mail_due_at,
     completion, completion_due_at, personal_key, locale)
    VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::timestamptz,
     $9::text, $10::timestamptz, $11::timestamptz, $12::text, $13::timestamptz, $14::text, $15::int, $16::text, $17::timestamptz,
     $18::text, $19::timestamptz, $20::text, $21::text)`;
  const update = `UPDATE ${table('agreements')}
    SET name = $3::text, status = $4::text, signer_name = $5::text, signer_signature = $6::text,
        signer_signature_hash = $7::text, created_at = $8::timestamptz, signing_order = $9::text,
        expires_at = $10::timestamptz, closed_at = $11::timestamptz, closed_reason = $12::text,
        next_reminder_at = $13::timestamptz, audit_head = $14::text, audit_length = $15::int,
        mail = $16::text, mail_due_at = $17::timestamptz, completion = $18::text, completion_due_at = $19::timestamptz,
        personal_key = $20::text, locale = $21::text
    WHERE id = $1::text AND account_id = $2::text`;
  // At most $3 of one account: the due rows numbered within their account, the earliest first; with
  // $4, then the open rows with no reminder scheduled (their own partial index), oldest first; and
  // the rows whose mail is due (their own partial index) that the first part did not take.
  const due = `SELECT account_id, id FROM (
      SELECT account_id, id, at, unscheduled,
        row_number() OVER (PARTITION BY account_id ORDER BY unscheduled, at, id) AS turn
      FROM (
        (SELECT account_id, id, least(expires_at, next_reminder_at) AS at, false AS unscheduled
          FROM ${table('agreements')}
          WHERE status = 'sent' AND closed_at IS NULL AND (expires_at <= $1::timestamptz OR next_reminder_at <= $1::timestamptz))
        UNION ALL
        (SELECT account_id, id, created_at AS at, true AS unscheduled
          FROM ${table('agreements')}
          WHERE $4::boolean AND status = 'sent' AND closed_at IS NULL AND next_reminder_at IS NULL
            AND NOT (expires_at IS NOT NULL AND expires_at <= $1::timestamptz)
          ORDER BY created_at LIMIT $2::int)
        UNION ALL
        (SELECT account_id, id, mail_due_at AS at, false AS unscheduled
          FROM ${table('agreements')}
          WHERE mail_due_at <= $1::timestamptz
            AND NOT (status = 'sent' AND closed_at IS NULL
              AND (coalesce(expires_at <= $1::timestamptz, false) OR coalesce(next_reminder_at <= $1::timestamptz, false)))
          ORDER BY mail_due_at LIMIT $2::int)
        UNION ALL
        (SELECT account_id, id, completion_due_at AS at, false AS unscheduled
          FROM ${table('agreements')}
          WHERE completion_due_at <= $1::timestamptz AND coalesce(mail_due_at > $1::timestamptz, true)
          ORDER BY completion_due_at LIMIT $2::int)
      ) AS candidates
    ) AS due
    WHERE turn <= $3::int ORDER BY unscheduled, at, id LIMIT $2::int`;
  const insertSigners = `INSERT INTO ${table('agreement_signers')}
    (agreement_id, position, id, first_name, last_name, email, should_identify, signature, signature_hash, signed_at,
     viewed_at, declined_at, decline_reason, signing_link_id, identity)
    SELECT $1::text, position - 1, id, first_name, last_name, email, should_identify, signature, signature_hash, signed_at,
      viewed_at, declined_at, decline_reason, signing_link_id, identity
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[], $9::timestamptz[],
        $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[], $14::text[])
      WITH ORDINALITY AS s (id, first_name, last_name, email, should_identify, signature, signature_hash, signed_at,
        viewed_at, declined_at, decline_reason, signing_link_id, identity, position)`;
  const insertAudit = `INSERT INTO ${table('agreement_audit')} (agreement_id, position, entry)
    SELECT $1::text, $2::int + position - 1, entry FROM unnest($3::text[]) WITH ORDINALITY AS t (entry, position)`;
  const insertDocuments = `INSERT INTO ${table('agreement_documents')}
    (agreement_id, position, id, document_name, file_size, file_hash, signed_file_hash, signed_file_key, fields)
    SELECT $1::text, position - 1, id, document_name, file_size, file_hash, signed_file_hash, signed_file_key, fields
    FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
      WITH ORDINALITY AS d (id, document_name, file_size, file_hash, signed_file_hash, signed_file_key, fields, position)`;
  // Erasure: the entries it rewrites; the agreement's events (their partial index, since it was
  // made) and the account's kept answers that locate it, each locked until the rewrite commits.
  const rewriteAudit = `UPDATE ${table('agreement_audit')} AS a SET entry = u.entry
    FROM unnest($2::int[], $3::text[]) AS u (position, entry)
    WHERE a.agreement_id = $1::text AND a.position = u.position`;
  const eventsOf = `SELECT id, data::text AS data FROM ${table('events')}
    WHERE account_id = $1::text AND type LIKE 'agreement-%' AND ordering_key = $2::text AND created_at >= $3::timestamptz
    FOR UPDATE`;
  const rewriteEvents = `UPDATE ${table('events')} AS e SET data = u.data::json
    FROM unnest($2::text[], $3::text[]) AS u (id, data)
    WHERE e.account_id = $1::text AND e.id = u.id`;
  const answersOf = `SELECT key, answer_body FROM ${table('idempotency_keys')}
    WHERE account_id = $1::text AND status = 'completed' AND right(answer_location, length($2::text)) = $2::text
    FOR UPDATE`;
  const rewriteAnswers = `UPDATE ${table('idempotency_keys')} AS k SET answer_body = u.body
    FROM unnest($2::text[], $3::text[]) AS u (key, body)
    WHERE k.account_id = $1::text AND k.key = u.key`;
  const deleteSigners = `DELETE FROM ${table('agreement_signers')} WHERE agreement_id = $1::text`;
  const deleteDocuments = `DELETE FROM ${table('agreement_documents')} WHERE agreement_id = $1::text`;

  const agreementParams = (agreement: AgreementRecord) => [
    agreement.id,
    agreement.accountId,
    agreement.name,
    agreement.status,
    agreement.signerName,
    agreement.signerSignature,
    agreement.signerSignatureHash,
    agreement.createdAt,
    agreement.signingOrder,
    agreement.expiresAt,
    agreement.closedAt,
    agreement.closedReason,
    agreement.nextReminderAt,
    agreement.auditHead?.hash ?? null,
    agreement.auditHead?.length ?? null,
    JSON.stringify(agreement.mail),
    mailDueAt(agreement),
    agreement.completion === null ? null : JSON.stringify(agreement.completion),
    completionDueAt(agreement),
    agreement.personalKey ?? null,
    agreement.locale ?? null,
  ];

  /** Appends the entries of `audit` from position `from` on: those before are stored already, and never rewritten. */
  async function appendAudit(
    tx: Queryable,
    agreementId: string,
    audit: readonly AuditEntry[],
    from: number,
  ): Promise<void> {
    if (audit.length <= from) return;
    await tx.query(insertAudit, [agreementId, from, audit.slice(from).map((entry) => JSON.stringify(entry))]);
  }

  /**
   * Replaces the agreement in `tx` with what `next` makes of it, under its row lock (a concurrent
   * change of it waits until this one commits), the trail held to `trailKept`: its row, signers and
   * documents written again, the entries past those stored appended. `null` when absent.
   */
  async function replace(
    tx: Queryable,
    accountId: string,
    id: string,
    operation: string,
    trailKept: (current: readonly AuditEntry[], next: readonly AuditEntry[]) => boolean,
    next: (current: AgreementRecord) => AgreementRecord,
  ): Promise<{ current: AgreementRecord; agreement: AgreementRecord } | null> {
    if ((await tx.query(lock, [accountId, id])).length === 0) return null;
    const [row] = await tx.query(select, [accountId, id]);
    if (row === undefined) return null;
    const current = agreementOfRow(row);
    const agreement = next(current);
    if (agreement.id !== id || agreement.accountId !== accountId) {
      throw new Error(`${operation}: the change must keep the id and account`);
    }
    if (!trailKept(current.audit, agreement.audit)) throw new Error(TRAIL_APPEND_ONLY);
    await tx.query(update, agreementParams(agreement));
    await tx.query(deleteSigners, [id]);
    await tx.query(deleteDocuments, [id]);
    await writeParts(tx, agreement);
    await appendAudit(tx, id, agreement.audit, current.audit.length);
    return { current, agreement };
  }

  async function writeParts(tx: Queryable, agreement: AgreementRecord): Promise<void> {
    const { signers, documents } = agreement;
    if (signers.length > 0) {
      await tx.query(insertSigners, [
        agreement.id,
        signers.map((signer) => signer.id),
        signers.map((signer) => signer.firstName),
        signers.map((signer) => signer.lastName),
        signers.map((signer) => signer.email),
        signers.map((signer) => signer.shouldIdentify),
        signers.map((signer) => signer.signature),
        signers.map((signer) => signer.signatureHash),
        signers.map((signer) => signer.signedAt),
        signers.map((signer) => signer.viewedAt),
        signers.map((signer) => signer.declinedAt),
        signers.map((signer) => signer.declineReason),
        signers.map((signer) => signer.signingLinkId),
        signers.map((signer) => (signer.identity === null ? null : JSON.stringify(signer.identity))),
      ]);
    }
    if (documents.length > 0) {
      await tx.query(insertDocuments, [
        agreement.id,
        documents.map((document) => document.id),
        documents.map((document) => document.documentName),
        documents.map((document) => document.fileSize),
        documents.map((document) => document.fileHash),
        documents.map((document) => document.signedFileHash),
        documents.map((document) => document.signedFileKey),
        documents.map((document) => JSON.stringify(document.fields)),
      ]);
    }
  }

  return {
    async insertAgreement(agreement, events, idempotency) {
      await db.transaction(async (tx) => {
        // First: the key's row lock keeps a takeover of the claim out until this commits.
        if (idempotency !== undefined) await keys.complete(tx, agreement.accountId, idempotency);
        await tx.query(insert, agreementParams(agreement));
        await writeParts(tx, agreement);
        await appendAudit(tx, agreement.id, agreement.audit, 0);
        await outbox.storeEvents(tx, events);
      });
    },
    async getAgreement(accountId, id) {
      const [row] = await db.query(select, [accountId, id]);
      return row === undefined ? null : agreementOfRow(row);
    },
    async deleteAgreement(accountId, id) {
      return (await db.query(deleteAgreement, [accountId, id])).length === 1;
    },
    async findSignedCopy(accountId, signedFileHash) {
      const [row] = await db.query(signedCopy, [accountId, signedFileHash]);
      return row === undefined ? null : { agreementId: row.agreement_id as string, documentId: row.id as string };
    },
    async agreementsDue(now, limit, perAccount, unscheduled = false) {
      return (await db.query(due, [now, limit, perAccount, unscheduled])).map((row) => ({
        accountId: row.account_id as string,
        id: row.id as string,
      }));
    },
    async listAgreements(accountId, page) {
      if (page.after === undefined) return (await db.query(firstPage, [accountId, page.limit])).map(toSummary);
      // Two statements, no transaction: an agreement's created_at and seq never change, and none is removed.
      if ((await db.query(cursorKnown, [accountId, page.after])).length === 0) return null;
      return (await db.query(pageAfter, [accountId, page.limit, page.after])).map(toSummary);
    },
    async updateAgreement(accountId, id, change) {
      return db.transaction(async (tx) => {
        let events: EventRecord[] = [];
        const replaced = await replace(tx, accountId, id, 'updateAgreement', extendsTrail, (current) => {
          const made = change(current);
          events = made.events;
          return made.agreement;
        });
        if (replaced === null) return null;
        await outbox.storeEvents(tx, events);
        return structuredClone(replaced.agreement);
      });
    },
    async eraseAgreement(accountId, id, erase, eraseData) {
      return db.transaction(async (tx) => {
        const replaced = await replace(tx, accountId, id, 'eraseAgreement', redactsTrail, erase);
        if (replaced === null) return null;
        const { current, agreement } = replaced;
        const changed = current.audit.flatMap((entry, position) => {
          const now = JSON.stringify(agreement.audit[position]);
          return JSON.stringify(entry) === now ? [] : [{ position, now }];
        });
        if (changed.length > 0)
          await tx.query(rewriteAudit, [id, changed.map((one) => one.position), changed.map((one) => one.now)]);
        const events = await tx.query(eventsOf, [accountId, id, current.createdAt]);
        if (events.length > 0) {
          const data = events.map((event) => JSON.stringify(eraseData(JSON.parse(event.data as string))));
          await tx.query(rewriteEvents, [accountId, events.map((event) => event.id), data]);
        }
        const answers = await tx.query(answersOf, [accountId, `/agreements/${id}`]);
        if (answers.length > 0) {
          const bodies = answers.map((answer) => JSON.stringify(eraseData(JSON.parse(answer.answer_body as string))));
          await tx.query(rewriteAnswers, [accountId, answers.map((answer) => answer.key), bodies]);
        }
        return structuredClone(agreement);
      });
    },
  };
}

function agreementOfRow(row: Row): AgreementRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    name: row.name as string,
    status: row.status as AgreementStatus,
    signerName: row.signer_name as string,
    signerSignature: row.signer_signature as string,
    signerSignatureHash: row.signer_signature_hash as string,
    signers: (JSON.parse(row.signers as string) as AgreementSignerRecord[]).map(signerShape),
    documents: (JSON.parse(row.documents as string) as AgreementDocumentRecord[]).map(documentRecordShape),
    createdAt: row.created_at as string,
    ...signingFields(row),
    audit: JSON.parse(row.audit as string) as AuditEntry[],
    auditHead: row.audit_head === null ? null : { hash: row.audit_head as string, length: row.audit_length as number },
    nextReminderAt: (row.next_reminder_at as string | null) ?? null,
    mail: JSON.parse(row.mail as string) as PendingMail[],
    completion: row.completion === null ? null : (JSON.parse(row.completion as string) as CompletionRecord),
    ...(row.personal_key === null ? {} : { personalKey: row.personal_key as string }),
    ...(row.locale === null ? {} : { locale: row.locale as string }),
  };
}

function signingFields(row: Row) {
  return {
    signingOrder: row.signing_order as SigningOrder,
    expiresAt: (row.expires_at as string | null) ?? null,
    closedAt: (row.closed_at as string | null) ?? null,
    closedReason: (row.closed_reason as ClosedReason | null) ?? null,
  };
}

function toSummary(row: Row): AgreementSummaryRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    name: row.name as string,
    status: row.status as AgreementStatus,
    signerName: row.signer_name as string,
    signerSignatureHash: row.signer_signature_hash as string,
    signers: (JSON.parse(row.signers as string) as (AgreementEventSigner & AgreementSignerRecord)[]).map(summarySigner),
    documents: (JSON.parse(row.documents as string) as AgreementDocument[]).map(documentShape),
    createdAt: row.created_at as string,
    ...signingFields(row),
  };
}

/** Fixes the key order to the record's, whatever the JSON the server built. */
function signerShape(signer: AgreementSignerRecord): AgreementSignerRecord {
  return {
    id: signer.id,
    firstName: signer.firstName,
    lastName: signer.lastName,
    email: signer.email,
    shouldIdentify: signer.shouldIdentify,
    signature: signer.signature,
    signatureHash: signer.signatureHash,
    signedAt: signer.signedAt,
    viewedAt: signer.viewedAt,
    declinedAt: signer.declinedAt,
    declineReason: signer.declineReason,
    signingLinkId: signer.signingLinkId,
    identity: signer.identity ?? null,
  };
}

/** A signer of a page: its identification worked out from what is stored, which is not shown. */
function summarySigner({
  signingLinkId,
  identity,
  ...signer
}: AgreementEventSigner & AgreementSignerRecord): AgreementEventSigner {
  return {
    ...signer,
    identification: identificationOf({
      shouldIdentify: signer.shouldIdentify,
      signingLinkId,
      identity: identity ?? null,
    }),
  };
}

function documentShape(document: AgreementDocument): AgreementDocument {
  return documentOf({ ...document, fileSize: Number(document.fileSize) });
}

function documentRecordShape(document: AgreementDocumentRecord): AgreementDocumentRecord {
  return { ...documentShape(document), signedFileKey: document.signedFileKey ?? null, fields: document.fields ?? [] };
}
