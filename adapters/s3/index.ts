export { s3Blobs, type S3BlobsOptions } from './s3-blobs.js';
