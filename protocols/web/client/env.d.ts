// esbuild bundles the style sheet that main.tsx imports.
declare module '*.css';
