export const SECTION_ID = 'baselines';
