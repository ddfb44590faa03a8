#!/usr/bin/env node
// Checks, at the start of `npm run demo` and `npm test`, that the Debian packages they need are installed
// (scripts/system-packages.txt, the list .ci/run installs too). Missing ones are installed with apt-get when this
// runs as root or with passwordless sudo; otherwise it stops with the one command to run.
//   node scripts/system-deps.mjs demo|test [--check]   (--check: report only, never install)
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LIST = join(dirname(fileURLToPath(import.meta.url)), 'system-packages.txt');

/** `[{ name, uses, why }]` from the list file (comments and blank lines skipped). */
export function readPackages(text = readFileSync(LIST, 'utf8')) {
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) continue;
    const [name, uses = '', ...why] = line.split(/\s+/);
    out.push({ name, uses: uses.split(',').filter(Boolean), why: why.join(' ') });
  }
  return out;
}

/** The packages `purpose` needs (`all`: every one, for .ci/run). */
export function packagesFor(purpose, packages = readPackages()) {
  return packages.filter((p) => purpose === 'all' || p.uses.includes(purpose)).map((p) => p.name);
}

const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { encoding: 'utf8', ...opts });

/** Which of `names` dpkg does not list as installed; undefined where there is no dpkg (not Debian). */
export function missingPackages(names) {
  const r = run('dpkg-query', ['-W', '-f=${Package} ${db:Status-Status}\\n', ...names]);
  if (r.error) return undefined;
  const installed = new Set(
    r.stdout
      .split('\n')
      .filter((l) => l.endsWith(' installed'))
      .map((l) => l.split(' ')[0].replace(/:.*$/, '')),
  );
  return names.filter((n) => !installed.has(n));
}

/** How apt-get can be run without asking anyone: as root, through passwordless sudo, or not at all. */
function privilege() {
  if (process.getuid?.() === 0) return [];
  const sudo = run('sudo', ['-n', 'true']);
  return !sudo.error && sudo.status === 0 ? ['sudo', '-n'] : undefined;
}

function main(argv) {
  const purpose = argv.find((a) => !a.startsWith('--')) ?? 'test';
  const checkOnly = argv.includes('--check');
  if (purpose === 'list') {
    process.stdout.write(packagesFor(argv[1] ?? 'all').join('\n') + '\n');
    return 0;
  }
  const wanted = packagesFor(purpose);
  const missing = missingPackages(wanted);
  if (missing === undefined) {
    console.warn(`system-deps: no dpkg here (not Debian?): make sure these are installed: ${wanted.join(' ')}`);
    return 0;
  }
  if (missing.length === 0) return 0;
  const command = `sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  const prefix = checkOnly ? undefined : privilege();
  if (prefix === undefined) {
    console.error(
      `npm ${purpose === 'test' ? 'test' : `run ${purpose}`} needs these Debian packages, not installed: ` +
        `${missing.join(', ')}.\nInstall them with:\n\n  ${command}\n`,
    );
    return 1;
  }
  console.log(`system-deps: installing ${missing.join(' ')} (apt-get)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const apt = (args) => {
    const [cmd, ...rest] = [...prefix, 'apt-get', ...args];
    return run(cmd, rest, { stdio: 'inherit', env });
  };
  const steps = [
    ['update', '-qq'],
    ['install', '-y', '-qq', '--no-install-recommends', ...missing],
  ];
  for (const step of steps) {
    const r = apt(step);
    if (r.error || r.status !== 0) {
      console.error(`system-deps: apt-get ${step[0]} failed; install them yourself:\n\n  ${command}\n`);
      return 1;
    }
  }
  const still = missingPackages(wanted) ?? [];
  if (still.length) {
    console.error(`system-deps: still not installed after apt-get: ${still.join(', ')}`);
    return 1;
  }
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1])
  process.exitCode = main(process.argv.slice(2));
