/**
 * The first lines of a child process's script (`node --input-type=module -e …`) under which the
 * packages `names` fail to resolve as they do where they are not installed (`ERR_MODULE_NOT_FOUND`):
 * a name ending in `/` hides every package under that scope or prefix, another that package and its
 * subpaths.
 */
export function hidingPackages(names: string[]): string {
  const hooks = `
const NAMES = ${JSON.stringify(names)};
export async function resolve(specifier, context, next) {
  if (NAMES.some((name) => (name.endsWith('/') ? specifier.startsWith(name) : specifier === name || specifier.startsWith(name + '/')))) {
    const error = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}`;
  return `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
`;
}
