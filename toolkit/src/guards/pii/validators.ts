// The few validator functions the detectors use, imported one module each (not the whole
// library). validator's per-function modules are CommonJS with `module.exports = fn`; their
// typings describe an ES default export, so the default import is the function at run time and
// is typed as such here.
import isCreditCardCjs from "validator/lib/isCreditCard.js";
import isEmailCjs from "validator/lib/isEmail.js";
import isIPCjs from "validator/lib/isIP.js";
import isJWTCjs from "validator/lib/isJWT.js";

export const isCreditCard = isCreditCardCjs as unknown as typeof isCreditCardCjs.default;
export const isEmail = isEmailCjs as unknown as typeof isEmailCjs.default;
export const isIP = isIPCjs as unknown as typeof isIPCjs.default;
export const isJWT = isJWTCjs as unknown as typeof isJWTCjs.default;
