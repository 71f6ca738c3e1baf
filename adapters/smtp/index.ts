export { smtpNotifier, type SmtpNotifier, type SmtpNotifierOptions } from './smtp-notifier.js';
