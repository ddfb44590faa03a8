import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  {
    // Settings are read once, by the container (src/shared/settings.ts parses them with core/settings.ts); the rest of
    // the extension reads the parsed KnownGoodSettings it is handed.
    files: ['src/**/*.ts'],
    ignores: ['src/container.ts', 'src/window.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' },
        {
          selector:
            "MemberExpression[property.name='getConfiguration'], ImportSpecifier[imported.name='getConfiguration']",
          message:
            'Read settings from the parsed KnownGoodSettings (SettingsAccess.current); only the container calls getConfiguration.',
        },
      ],
    },
  },
  {
    // The core knows nothing of VS Code: it is tested in plain Node and reused by the CLI.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'vscode', message: 'src/core must not import vscode: put VS Code code in the adapter layer.' },
          ],
        },
      ],
    },
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
