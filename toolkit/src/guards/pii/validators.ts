// The few validator functions the detectors use, imported one module each (not the whole
// library). validator's per-function modules are CommonJS with `module.exports = fn`; their
// typings describe an ES default export, so the default import is the function at run time (in
// the CommonJS build too: those modules also set `module.exports.default`) and is typed as such
// here, whichever way the build's module setting types it.
import isCreditCardCjs from "validator/lib/isCreditCard.js";
import isEmailCjs from "validator/lib/isEmail.js";
import isIPCjs from "validator/lib/isIP.js";
import isJWTCjs from "validator/lib/isJWT.js";

type Fn<M> = M extends { default: infer F } ? F : M;

export const isCreditCard = isCreditCardCjs as unknown as Fn<typeof isCreditCardCjs>;
export const isEmail = isEmailCjs as unknown as Fn<typeof isEmailCjs>;
export const isIP = isIPCjs as unknown as Fn<typeof isIPCjs>;
export const isJWT = isJWTCjs as unknown as Fn<typeof isJWTCjs>;
