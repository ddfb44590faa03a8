import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The parts of the extension and the arrows allowed between them (docs/architecture.md draws them).
const FEATURES = [
  'args',
  'baselines',
  'bench',
  'bisect',
  'dashboard',
  'fleet',
  'probes',
  'replay',
  'runs',
  'tree',
  'walkthrough',
  'whatChanged',
];
/** The feature folders of src/core (the rest is infrastructure they share: probes, transport, util, …). */
const CORE_FEATURES = [
  'args',
  'baselines',
  'bench',
  'bisect',
  'dashboard',
  'fleet',
  'metrics',
  'remote',
  'replay',
  'restore',
  'runs',
  'whatChanged',
];
const NAMED_EXPORTS = { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' };
const NO_GET_CONFIGURATION = {
  selector: "MemberExpression[property.name='getConfiguration'], ImportSpecifier[imported.name='getConfiguration']",
  message:
    'Read settings from the parsed KnownGoodSettings (SettingsAccess.current); only the container calls getConfiguration.',
};
const NO_PLAIN_ERROR = {
  selector: 'NewExpression[callee.name=/^(Error|TypeError|RangeError)$/]',
  message: 'Throw a KnownGoodError with a code (src/core/errors.ts): the code decides how the failure is shown.',
};
// `./<feature>/*` too: the files at src/ (api.ts, constants.ts, window.ts) reach a feature that way.
const noFeatures = (except, why) =>
  FEATURES.filter((f) => f !== except).map((f) => ({
    group: [`./${f}/*`, `../${f}/*`, `../../${f}/*`],
    message: why,
  }));
const noContainer = {
  group: ['../container', '../../container'],
  message: 'Features get their …Deps from the container; they never import it.',
};

/** What src/core may import (a later block for the same files replaces the rule, so it repeats these). */
const coreImports = (...more) => coreImportsAt('../../', ...more);
/** The same for a file `up` below src/ (`../../../` in a folder of a core feature, e.g. whatChanged/causes/). */
const coreImportsAt = (up, ...more) => ({
  paths: [{ name: 'vscode', message: 'src/core must not import vscode: put VS Code code in the adapter layer.' }],
  patterns: [
    { group: [`${up}*`, `!${up}core/**`], message: 'src/core imports only src/core (and packages).' },
    ...more,
  ],
});

function layers() {
  const featureBlocks = FEATURES.map((f) => ({
    files: [`src/${f}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...noFeatures(
              f,
              'A feature never imports another feature: ask for its capability in your …Deps (the container wires it).',
            ),
            noContainer,
          ],
        },
      ],
      'no-restricted-syntax': ['error', NAMED_EXPORTS, NO_GET_CONFIGURATION],
    },
  }));
  return [
    {
      // Shared VS Code services (settings, hosts, commands, terminal, tree sections): used by features, use none.
      files: ['src/shared/**/*.ts', 'src/hosts/**/*.ts', 'src/window.ts', 'src/constants.ts', 'src/api.ts'],
      ignores: ['src/window.ts'],
      rules: {
        'no-restricted-imports': [
          'error',
          { patterns: [...noFeatures(undefined, 'Shared services know no feature.'), noContainer] },
        ],
        'no-restricted-syntax': ['error', NAMED_EXPORTS, NO_GET_CONFIGURATION],
      },
    },
    ...featureBlocks,
    {
      // The CLI reuses the core; it knows nothing of VS Code or of the extension's features.
      files: ['src/cli/**/*.ts'],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            paths: [{ name: 'vscode', message: 'The CLI runs in plain Node.' }],
            patterns: [...noFeatures(undefined, 'The CLI uses src/core only.'), noContainer],
          },
        ],
      },
    },
    {
      // The core knows nothing of VS Code: it is tested in plain Node and reused by the CLI; its failures are
      // KnownGoodErrors with a code.
      files: ['src/core/**/*.ts'],
      rules: {
        'no-restricted-imports': ['error', coreImports()],
        'no-restricted-syntax': ['error', NAMED_EXPORTS, NO_PLAIN_ERROR],
      },
    },
    {
      // A folder inside a core feature (whatChanged/causes/): the same rule, one level deeper.
      files: ['src/core/*/*/**/*.ts'],
      rules: { 'no-restricted-imports': ['error', coreImportsAt('../../../')] },
    },
    {
      // The probe machinery (defineProbe, the runner, the Run Probe catalogue) is what features build on: it knows
      // none of them. A feature's Run Probe choice lives with the feature; src/probes/choices.ts lists them.
      files: ['src/core/probes/**/*.ts'],
      rules: {
        'no-restricted-imports': [
          'error',
          coreImports({
            group: CORE_FEATURES.map((f) => `../${f}/*`),
            message: 'core/probes knows no feature: the feature imports it (and offers its probe choices).',
          }),
        ],
      },
    },
  ];
}

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'out/**',
      'node_modules/**',
      '.cache/**',
      'test-artifacts/**',
      'dist-vsix/**',
      '**/*.mjs',
      '**/*.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['test', 'describe', 'it', 'suite', 'before', 'after'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' }],
    },
  },
  ...layers(),
  {
    // What Changed? grew one 1,485-line analyze.ts; it is one module per kind of cause now (docs/what-changed.md,
    // "Where the code is"). A file that reaches the limit is split, not let grow. No exceptions today.
    files: ['src/core/whatChanged/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 500 }] },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
