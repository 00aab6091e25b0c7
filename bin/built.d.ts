// Types of bin/built.js (plain JavaScript, as bin/ runs before any TypeScript loader), for the tests.
export declare function serverBuildIsFresh(): boolean;
export declare function webBuildIsFresh(): boolean;
