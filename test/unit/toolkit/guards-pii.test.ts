// pii_detection (sensitive_data): each detector on positives and hard negatives, descriptions
// that never repeat what they describe, and exact redaction.
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import test from "ava";
import { runEvals } from "../../../toolkit/src/index.ts";
import { detectPii, piiGuard, redact } from "../../../toolkit/src/guards/index.ts";
import { identifierView } from "../../../toolkit/src/guards/pii/spaced.ts";
import type { PiiKind } from "../../../toolkit/src/guards/index.ts";

const positives: Array<[string, PiiKind, string, string]> = [
  // [text, kind, matched text, description]
  ["write to jane.doe@example.com today", "email", "jane.doe@example.com", "email address j***@e***.com"],
  ["cc: a.b+tag@mail.example.co.uk", "email", "a.b+tag@mail.example.co.uk", "email address a***@m***.uk"],
  ["call (201) 555-0123 now", "phone", "(201) 555-0123", "phone number ending 23"],
  ["phone: 2015550123", "phone", "2015550123", "phone number ending 23"],
  ["office +44 20 7946 0958", "phone", "+44 20 7946 0958", "phone number (+44) ending 58"],
  ["dial 0044 20 7946 0958", "phone", "0044 20 7946 0958", "phone number (+44) ending 58"],
  ["Leeds 0113 496 0000", "phone", "0113 496 0000", "phone number ending 00"],
  ["+33 1 99 00 12 34", "phone", "+33 1 99 00 12 34", "phone number (+33) ending 34"],
  // national formats of the default regions (libphonenumber's example numbers)
  ["Ligue para (11) 96123-4567", "phone", "(11) 96123-4567", "phone number ending 67"],
  ["Mi móvil es 612 34 56 78.", "phone", "612 34 56 78", "phone number ending 78"],
  ["携帯 090-1234-5678", "phone", "090-1234-5678", "phone number ending 78"],
  ["Mi celular: 222 123 4567", "phone", "222 123 4567", "phone number ending 67"],
  ["call (506) 234-5678", "phone", "(506) 234-5678", "phone number ending 78"],
  ["Roma 06 6982 1234", "phone", "06 6982 1234", "phone number ending 34"],
  ["Mijn nummer is 06 12345678", "phone", "06 12345678", "phone number ending 78"],
  ["call me on 415.555.2671 tonight", "phone", "415.555.2671", "phone number ending 71"],
  // a period and a space end the sentence, not the number's group: the next sentence's number is not part of it
  ["ring 0113 496 0000. 12 items are left", "phone", "0113 496 0000", "phone number ending 00"],
  ["call (201) 555-0123. 42 people called", "phone", "(201) 555-0123", "phone number ending 23"],
  ["pay 4242 4242 4242 4242", "credit_card", "4242 4242 4242 4242", "Visa card number ending 4242"],
  ["card 5555-5555-5555-4444", "credit_card", "5555-5555-5555-4444", "Mastercard card number ending 4444"],
  ["amex 3782 822463 10005", "credit_card", "3782 822463 10005", "American Express card number ending 0005"],
  ["6011111111111117", "credit_card", "6011111111111117", "Discover card number ending 1117"],
  // 16-digit cards of other networks' issuer ranges, Luhn-valid, grouped or bare
  ["Elo 6362 9700 0045 7013", "credit_card", "6362 9700 0045 7013", "Elo card number ending 7013"],
  ["6062825624254001", "credit_card", "6062825624254001", "Hipercard card number ending 4001"],
  ["Mir 2200-0000-0000-0004", "credit_card", "2200-0000-0000-0004", "Mir card number ending 0004"],
  ["6304000000000000", "credit_card", "6304000000000000", "Maestro card number ending 0000"],
  ["5019 1234 5678 9013", "credit_card", "5019 1234 5678 9013", "Dankort card number ending 9013"],
  ["9792000000000003", "credit_card", "9792000000000003", "Troy card number ending 0003"],
  ["6070 1234 5678 9017", "credit_card", "6070 1234 5678 9017", "RuPay card number ending 9017"],
  ["card 2100000000000005", "credit_card", "2100000000000005", "Payment card number ending 0005"],
  ["routing number 021000021", "routing_number", "021000021", "bank routing number ending 21"],
  ["ABA: 011000015", "routing_number", "011000015", "bank routing number ending 15"],
  ["RTN 026009593 for the deposit", "routing_number", "026009593", "bank routing number ending 93"],
  // a bank account number: digits right after the words that name it, in a text about a bank
  ["My bank account is 09884624524, for the direct deposit.", "bank_account", "09884624524", "bank account number ending 24"],
  ["checking account number: 1234-5678-90 at Chase", "bank_account", "1234-5678-90", "bank account number ending 90"],
  ["Use account 0168754245, routing 021000021 for the transfer.", "bank_account", "0168754245", "bank account number ending 45"],
  ["wire to acct # 44 0032 1187 please", "bank_account", "44 0032 1187", "bank account number ending 87"],
  ["IBAN GB29 NWBK 6016 1331 9268 19 OK", "iban", "GB29 NWBK 6016 1331 9268 19", "IBAN (GB) ending 6819"],
  ["DE89370400440532013000", "iban", "DE89370400440532013000", "IBAN (DE) ending 3000"],
  // any separator, or none, in any grouping, in either case
  ["IBAN GB29-NWBK-6016-1331-9268-19 for the refund", "iban", "GB29-NWBK-6016-1331-9268-19", "IBAN (GB) ending 6819"],
  ["to NL91.ABNA.0417.1643.00, J. de Vries", "iban", "NL91.ABNA.0417.1643.00", "IBAN (NL) ending 4300"],
  ["pay GB29 NWBK 60161331926819 today", "iban", "GB29 NWBK 60161331926819", "IBAN (GB) ending 6819"],
  ["my iban is de89 3704 0044 0532 0130 00", "iban", "de89 3704 0044 0532 0130 00", "IBAN (DE) ending 3000"],
  ["ref AB12 GB29 NWBK 6016 1331 9268 19", "iban", "GB29 NWBK 6016 1331 9268 19", "IBAN (GB) ending 6819"],
  ["SSN 078-05-1120", "ssn", "078-05-1120", "US social security number (digits withheld)"],
  ["id 219-09-9999 on file", "ssn", "219-09-9999", "US social security number (digits withheld)"],
  ["social security number 078051120", "ssn", "078051120", "US social security number (digits withheld)"],
  // next to an SSN word, nine digits in any grouping
  ["SSN: 078.05.1120", "ssn", "078.05.1120", "US social security number (digits withheld)"],
  ["SS# 219 099 999 on file", "ssn", "219 099 999", "US social security number (digits withheld)"],
  ["my soc. sec. no is 219099999", "ssn", "219099999", "US social security number (digits withheld)"],
  ["passport number: C01X00T47", "passport", "C01X00T47", "passport number ending 47"],
  ["Reisepass Nr. C01X00T47", "passport", "C01X00T47", "passport number ending 47"],
  ["passeport n° 12AB34567", "passport", "12AB34567", "passport number ending 67"],
  ["passport no 123 456 789", "passport", "123 456 789", "passport number ending 89"],
  ["from 203.0.113.45.", "ip_address", "203.0.113.45", "IPv4 address 203.0.113.x"],
  ["host 2001:db8:85a3::8a2e:370:7334 down", "ip_address", "2001:db8:85a3::8a2e:370:7334", "IPv6 address 2001:db8:…"],
  ["key AKIAIOSFODNN7EXAMPLE", "api_key", "AKIAIOSFODNN7EXAMPLE", "AWS access key ID (AKIA…, 20 chars)"],
  ["ghp_R8sT2vW4xY6zA1bC3dE5fG7hJ9kL0mN2pQ4r", "api_key", "ghp_R8sT2vW4xY6zA1bC3dE5fG7hJ9kL0mN2pQ4r", "GitHub token (ghp_…, 40 chars)"],
  [
    "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "api_key",
    "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "Slack token (xoxb-…, 54 chars)",
  ],
  ["sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "Stripe live secret key (sk_live_…, 32 chars)"],
  [
    "key=sk-proj-Zx81Qw7Er6Ty5Ui4Op3As2Df1GhJkLmN0bVcXz9",
    "api_key",
    "sk-proj-Zx81Qw7Er6Ty5Ui4Op3As2Df1GhJkLmN0bVcXz9",
    "LLM API key (sk-…, 47 chars)",
  ],
  ["Bearer ws_sk_Hq81dkLm29xPq0aZ7yTn", "api_key", "ws_sk_Hq81dkLm29xPq0aZ7yTn", "Berth workspace API key (ws_sk_…, 26 chars)"],
  [
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----",
    "private_key",
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----",
    "PEM private key (EC)",
  ],
  [
    "t=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "jwt",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "JSON Web Token (108 chars)",
  ],
  ["db password: Xk9#mP2$vL7q", "secret", "Xk9#mP2$vL7q", 'value of "password" (12 chars)'],
  ["my password is Tr0ub4dor&3", "secret", "Tr0ub4dor&3", 'value of "password" (11 chars)'],
  // the key's name in words, and the passwords of a login or a network
  ["My API key is API-26395f12686, for the integration.", "secret", "API-26395f12686", 'value of "api key" (15 chars)'],
  ["The login pass is Summer2025!, use it", "secret", "Summer2025!", 'value of "login pass" (11 chars)'],
  ["Network key is SecretKey456, for setup.", "secret", "SecretKey456", 'value of "network key" (12 chars)'],
  ["wifi password: Kx7-blue-otter", "secret", "Kx7-blue-otter", 'value of "password" (14 chars)'],
  ["postgres://app:s3cr3tPass@db:5432/x", "secret", "s3cr3tPass", "password in a URL (10 chars)"],
  ["1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "crypto_address", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "Bitcoin address ending vfNa"],
  [
    "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    "crypto_address",
    "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    "Bitcoin address ending f3t4",
  ],
  [
    "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
    "crypto_address",
    "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
    "Bitcoin address ending fmv3",
  ],
  [
    "to 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "crypto_address",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "Ethereum address ending eAed",
  ],
  // written digit by digit, with spaces between (spaced.ts): joined, then judged by the same rules
  ["Call me at 4 1 5 -5 5 5 -0 1 3 2 for repair.", "phone", "4 1 5 -5 5 5 -0 1 3 2", "phone number ending 32"],
  ["the phone book has 2 8 7- 87 2- 24 85", "phone", "2 8 7- 87 2- 24 85", "phone number ending 85"],
  ["my SSN is 2 1 9 -0 9 -9 9 9 9", "ssn", "2 1 9 -0 9 -9 9 9 9", "US social security number (digits withheld)"],
  ["pay 4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2 now", "credit_card", "4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2", "Visa card number ending 4242"],
  ["my ip: 8 .2 .4 .4", "ip_address", "8 .2 .4 .4", "IPv4 address 8.2.4.x"],
  // spelt out character by character, a digit or an "@" among them
  ["my email is r c v r y @ e m a i l . c o m, thanks", "email", "r c v r y @ e m a i l . c o m", "email address r***@e***.com"],
  [
    "send to b c 1 q a r 0 s r r r 7 x f k v y 5 l 6 4 3 l y d n w 9 r e 5 9 g t z z w f 5 m d q now",
    "crypto_address",
    "b c 1 q a r 0 s r r r 7 x f k v y 5 l 6 4 3 l y d n w 9 r e 5 9 g t z z w f 5 m d q",
    "Bitcoin address ending 5mdq",
  ],
  // nine spaced digits beside "SSN", in a text with no three digits in a row
  ["my SSN is 2 1 9 0 9 9 9 9 9", "ssn", "2 1 9 0 9 9 9 9 9", "US social security number (digits withheld)"],
  // a card written digit by digit near "SSN": its first nine digits are not an SSN
  ["SSN on file; pay 4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2", "credit_card", "4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2", "Visa card number ending 4242"],
  // the words that name a value typed without their vowels ("psswrd", "rtng"), read as those words
  ["My psswrd is Tr0ub4dor&3, keep it safe", "secret", "Tr0ub4dor&3", 'value of "password" (11 chars)'],
  ["Ntwrk ky is Hx9-4471-ab for the router", "secret", "Hx9-4471-ab", 'value of "network key" (11 chars)'],
  ["Use acct 0168754245, rtng 021000021 fr trnsfr.", "bank_account", "0168754245", "bank account number ending 45"],
  // a secret's value with spaces put inside it, after the word that names it
  ["my password is Sum mer 20 25 !, use it", "secret", "Sum mer 20 25 !", 'value of "password" (11 chars)'],
  ["The lgn pass is Sec ure Pas s1 2 3", "secret", "Sec ure Pas s1 2 3", 'value of "login pass" (13 chars)'],
  // an address with spaces put inside it, around its "@" and its dots
  ["In the log, my eml j hn.d oe@em ail.c om, see it", "email", "j hn.d oe@em ail.c om", "email address j***@e***.com"],
  ["Snd cnf to my eml: jhn.smth@ac me .com, updt order.", "email", "jhn.smth@ac me .com", "email address j***@a***.com"],
  ["write to sales @ acme . com for a quote", "email", "sales @ acme . com", "email address s***@a***.com"],
];

for (const [text, kind, value, description] of positives) {
  test(`pii finds ${kind} in ${JSON.stringify(text.slice(0, 40))}`, (t) => {
    const hits = detectPii(text).filter((h) => h.kind === kind);
    t.is(hits.length, 1, JSON.stringify(detectPii(text)));
    const h = hits[0]!;
    t.is(text.slice(h.start, h.end), value);
    t.is(h.description, description);
    t.false(h.description.includes(value), "the description repeats the value");
    t.true(h.score >= 0.5);
  });
}

const negatives: Array<[string, string]> = [
  ["Card 4242 4242 4242 4241 fails Luhn", "Luhn failure"],
  ["1234 5678 9012 3456 placeholder", "a placeholder card failing Luhn"],
  ["Elo 6362 9700 0045 7014, Mir 2200 0000 0000 0005", "cards of other networks failing Luhn"],
  ["id 2100000000000005 and 1700000000000001", "16 bare digits of no named network, no card word; a timestamp"],
  ["routing number 123456789, ABA 131000018", "routing numbers failing the checksum or the prefix"],
  ["Order 021000021 shipped, ref 011000015", "valid routing numbers without a routing word"],
  ["upgrade to version 1.2.3.4", "version number"],
  ["Windows build 10.0.19045.3803", "dotted build number"],
  ["on 2024-01-15 at 10:30", "ISO date"],
  ["deadline 15/01/2025 and 01.02.2025", "dates"],
  ["Order number 123456789 shipped", "order number"],
  ["tracking 1Z999AA10123456784", "tracking number"],
  ["ISBN 978-3-16-148410-0", "ISBN"],
  ["grew from 1 250 000 to 1 730 000", "thousands groups"],
  ["SKU 4000-1234-5678", "SKU"],
  ["ZIP 90210-1234", "ZIP+4 code"],
  ["The ISBN-10 0-306-40615-2 is on the back cover", "ISBN-10 with dashes"],
  ["Shipment 1Z 999 AA1 01 2345 6784 arrives", "digits after a code of letters and digits"],
  ["Ticket 0612345678 closed; invoice 2024 0612 3456 78", "bare and grouped ids"],
  ["Timestamp 1700000000000", "epoch millis"],
  ["IBAN GB28 NWBK 6016 1331 9268 19 is wrong", "IBAN failing mod-97"],
  ["IBAN GB28-NWBK-6016-1331-9268-19, de88 3704 0044 0532 0130 00, NL92.ABNA.0417.1643.00", "separated IBANs failing mod-97"],
  ["De89 3704 0044 0532 0130 00", "an IBAN in mixed case"],
  ["000-12-3456 666-45-6789 900-12-3456 123-00-4567 123-45-0000", "invalid SSN ranges"],
  ["SSN 000123456, ssn 666451234, SSN 912345678, SSN 123004567, SSN: 123.45.0000", "invalid SSNs next to SSN words"],
  ["Order 078051120 and ref 219 099 999", "nine digits without an SSN word"],
  ["passport renewal takes 6 weeks, passport photos 2 by 2", "passport words without a number"],
  ["npm install @scope/pkg@1.2.3", "package spec"],
  ["commit 3f786850e387550fdab836ed7e6dc881de23001b", "git sha"],
  ["tx 0x88df016429689c079f3b2f6ad39fa052532c56795b733da78a91ebe6a713944b", "transaction hash"],
  ["bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "bech32 checksum failure"],
  ["1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb", "base58check failure"],
  ["Set password=your_password_here", "placeholder password"],
  ["The test token is sess-000000000000, for demo", "a token of one repeated digit"],
  ["The test account is 000000000000, routing 000000000", "a bank account and a routing number of zeros"],
  ["Call my account manager at the bank on Monday; account 12 was closed", "account words without an account number"],
  ["Account 0168754245 was created for the shop", "an account number in a text with no bank in it"],
  ["My bank account has 1500000 dollars in it", "an amount after account words"],
  ["the private key is stored in the vault", "prose after a key's name"],
  ["your boarding pass is ready, the bus pass is 25 dollars", "passes that are not passwords"],
  ["the api key is invalid, and the network key is missing", "prose after key words"],
  ["password: ********", "masked password"],
  ["the token is expired", "prose after token"],
  ["a token limit of 4096 tokens", "token count"],
  ["Authorization: Bearer <token>", "placeholder bearer"],
  ["use scikit-learn (sk-learn)", "sk- word"],
  ["What is a JWT and how is it signed?", "question about JWTs"],
  ["std::vector and 12:30:45", "C++ scope and time"],
  ["Pi is 3.14159265358979", "decimal"],
  ["HTTP 503 between 09:00 and 09:45", "times"],
  // digits with spaces between them that join into no identifier, or are not one number
  ["count 1 2 3 4 5 6 7 8 9 10 and go", "a count"],
  ["the scores were 7 8 9 6 5 4 3 2 1 0 in order", "digits without a phone word"],
  ["see sections 1. 2. 3. 4. for details", "a numbered list (a dot then a space ends a group)"],
  ["pay 4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 1 now", "a spaced card failing Luhn"],
  ["rows 3 4 5 and columns 6 7 8 of table 9", "row and column numbers"],
  ["the alphabet a b c d e f g and 1 2 3", "letters and digits spelt out that join into no identifier"],
  ["| a | b | c | 1 | 2 | 3 |", "a table row"],
  ["x = 1 + 2 * 3 - 4 / 5", "arithmetic"],
  ["write to j o h n @ e x a m p l e and ask", "an address spelt out without its domain's dot"],
  // short words after a secret's name that are prose, not a value with spaces put inside it
  ["my password is 1 of 2 I use, both old", "words after a password's name"],
  ["the wifi password is on the 2nd fl, ask Bob", "where a password is written"],
  ["my psswrd is too short", "prose after a password's name typed without vowels"],
  ["the password is ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 ab1 and more", "short pieces that do not end a clause"],
  // an "@" among words that join into no address
  ["see you @ 5 pm. ok then", "an at sign for a time"],
  ["follow @jane and @bob on the site . com", "handles"],
  ["Is mail sent to a name ending with @somedomain.com received?", "a domain after an at sign, without a name"],
];

for (const [text, what] of negatives) {
  test(`pii ignores ${what}`, (t) => {
    const strong = detectPii(text).filter((h) => h.score >= 0.5);
    t.deepEqual(strong, [], JSON.stringify(strong));
  });
}

test("private, loopback and link-local addresses score below the default threshold", (t) => {
  for (const ip of ["192.168.0.1", "10.0.0.7", "172.20.1.1", "127.0.0.1", "169.254.1.1", "fe80::1ff:fe23:4567:890a"]) {
    const hits = detectPii(`addr ${ip} here`).filter((h) => h.kind === "ip_address");
    t.is(hits.length, 1, ip);
    t.true(hits[0]!.score < 0.5, ip);
  }
  t.deepEqual(detectPii("listen on ::1 and ::"), []);
  t.is(piiGuard("router at 192.168.0.1").result, "pass");
});

test("the public DNS resolvers name a service, not a device: they score below the default threshold", (t) => {
  for (const text of [
    "Does it use 1.1.1.1 as default?",
    "set DNS to 8.8.8.8 and 8.8.4.4",
    "my ip is 9.9.9.9?",
    "resolver 2606:4700:4700::1111",
  ]) {
    t.is(piiGuard(text).result, "pass", text);
    const hits = detectPii(text);
    t.true(hits.length > 0, `${text}: still found, as an address of no one's`);
    t.true(
      hits.every((h) => h.kind === "ip_address" && h.score < 0.5),
      text,
    );
  }
  // an address beside them still counts
  t.is(piiGuard("set DNS to 8.8.8.8; the client was 81.2.69.160").result, "block");
});

test("an address given as one's own counts, even a private one; loopback never does", (t) => {
  const score = (text: string) => detectPii(text).find((h) => h.kind === "ip_address")?.score;
  t.is(score("my ip: 192.168.1.23, can you see why the VPN drops?"), 0.6);
  t.is(score("our IP address is 10.0.0.5"), 0.6);
  t.is(score("my laptop's ip is 172.20.1.1"), 0.6);
  t.is(score("my ipv6 is fd12:3456:789a::1"), 0.6);
  t.is(score("my ip is 203.0.113.5"), 0.85);
  t.is(score("IP: 198.51.100.7"), 0.85);
  t.is(score("from 203.0.113.45 at midnight"), 0.7);
  t.is(score("my ip: 127.0.0.1"), 0.2);
  t.is(score("My router's IP is 192.168.0.1"), 0.2);
  t.is(score("Set the gateway to 192.168.1.1 in the router settings"), 0.2);
});

test("spans claimed by a specific detector are not reported again by a general one", (t) => {
  // the card is not also a phone number, the key value is not also a generic secret
  t.deepEqual(
    detectPii("card 4242424242424242").map((h) => h.kind),
    ["credit_card"],
  );
  t.deepEqual(
    detectPii("aws_access_key_id = AKIAIOSFODNN7EXAMPLE").map((h) => h.kind),
    ["api_key"],
  );
});

test("entities limits the kinds reported", (t) => {
  const text = "jane@example.com 4242 4242 4242 4242";
  t.deepEqual(
    detectPii(text, { entities: ["email"] }).map((h) => h.kind),
    ["email"],
  );
  t.deepEqual(
    detectPii(text, { entities: ["credit_card"] }).map((h) => h.kind),
    ["credit_card"],
  );
});

test("phoneRegions decides which national formats count", (t) => {
  t.is(detectPii("ring 0113 496 0000", { phoneRegions: ["US"] }).length, 0);
  t.is(detectPii("ring 0113 496 0000", { phoneRegions: ["GB"] }).length, 1);
  // international numbers do not depend on the regions
  t.is(detectPii("ring +44 113 496 0000", { phoneRegions: ["US"] }).length, 1);
});

const redactions: Array<[string, string]> = [
  ["Email jane@example.com or call (201) 555-0123.", "Email [REDACTED:EMAIL] or call [REDACTED:PHONE]."],
  ["card 4242 4242 4242 4242, exp 12/34", "card [REDACTED:CREDIT_CARD], exp 12/34"],
  ["IBAN GB29 NWBK 6016 1331 9268 19 please", "IBAN [REDACTED:IBAN] please"],
  ["db password: Xk9#mP2$vL7q\nnext line", "db password: [REDACTED:SECRET]\nnext line"],
  ["ssn 078-05-1120, ip 81.2.69.160", "ssn [REDACTED:SSN], ip [REDACTED:IP_ADDRESS]"],
  ["k=AKIAIOSFODNN7EXAMPLE;", "k=[REDACTED:API_KEY];"],
  ["Call me at 4 1 5 -5 5 5 -0 1 3 2 for repair.", "Call me at [REDACTED:PHONE] for repair."],
  ["no pii here", "no pii here"],
  ["émoji 😀 jane@example.com ✓", "émoji 😀 [REDACTED:EMAIL] ✓"],
];

for (const [text, expected] of redactions) {
  test(`redact ${JSON.stringify(text.slice(0, 30))}`, (t) => {
    t.is(redact(text, detectPii(text)), expected);
  });
}

test("redact merges overlapping spans under the longest kind and clamps out-of-range spans", (t) => {
  const text = "abcdefghij";
  t.is(
    redact(text, [
      { kind: "a", start: 1, end: 4 },
      { kind: "longer", start: 2, end: 8 },
    ]),
    "a[REDACTED:LONGER]ij",
  );
  t.is(
    redact(text, [
      { kind: "x", start: 8, end: 99 },
      { kind: "y", start: 3, end: 3 },
    ]),
    "abcdefgh[REDACTED:X]",
  );
  t.is(redact(text, []), text);
});

test("piiGuard: threshold and action decide the result", (t) => {
  const text = "mail jane@example.com";
  t.like(piiGuard(text), { guardType: "pii_detection", result: "block", confidence: 0.9 });
  t.like(piiGuard(text, { threshold: 0.95 }), { result: "pass", confidence: 0.9 });
  t.like(piiGuard(text, { action: "redact" }), { result: "redact" });
  t.like(piiGuard(text, { action: "flag" }), { result: "flag" });
  t.like(piiGuard("nothing to see"), { result: "pass", confidence: 0, matches: [] });
});

test("piiGuard: the allowlist never triggers (literal and pattern)", (t) => {
  const text = "write to support@berth.dev or jane@example.com";
  const literal = piiGuard(text, { allowlist: ["SUPPORT@berth.dev"] });
  t.deepEqual(
    literal.matches.map((m) => m.description),
    ["email address j***@e***.com"],
  );
  const pattern = piiGuard(text, { allowlist: ["/[a-z.]+@(?:berth\\.dev|example\\.com)/"] });
  t.like(pattern, { result: "pass", confidence: 0, matches: [] });
});

test("the caches of detections keep none of the texts they saw: a cached phone number or stem is a copy", (t) => {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(3500); // ~200 KB
  gc();
  const before = getHeapStatistics().used_heap_size;
  for (let i = 0; i < 300; i++) {
    // a fresh text each time (built, not a constant), a distinct phone number and a distinct long word
    const word = String(i).replace(/\d/g, (d) => "abcdefghij"[Number(d)]!); // i in letters: 300 distinct long words
    const text = `${filler} ${i} call +44 20 7946 ${String(1000 + i)} about supercalifragilistic${word}ness`;
    detectPii(text);
    runEvals({ input: text, output: "Refunds take five days.", latencyMs: 10 }, { evals: { safety: { enabled: false } } });
  }
  gc();
  const retainedMiB = (getHeapStatistics().used_heap_size - before) / 2 ** 20;
  // 300 texts of 200 KB: 60 MiB if any cache held on to them (about 1.5 MiB when none does)
  t.true(retainedMiB < 6, `${retainedMiB.toFixed(1)} MiB retained`);
});

// ITIN, passport and driver's licence numbers and cards of every length block; invalid IBANs and
// look-alikes pass (probes of the evaluation on independent data, docs/guards.md).
const lessCommonPii: Array<[string, PiiKind]> = [
  ["My ITIN is 912-78-3456.", "itin"],
  ["ITIN: 987-65-4321", "itin"],
  ["My passport number is C03005988.", "passport"],
  ["US passport no. 963545637, expires 2031.", "passport"],
  ["Driver licence no. W426-545-30-761-0 (Florida).", "drivers_license"],
  ["DL# S53012684, issued in Wisconsin.", "drivers_license"],
  ["Her DL number is NYB204815, renewed in May.", "drivers_license"],
  ["My Amex is 378282246310005.", "credit_card"],
  ["Old Diners card: 36227206271667.", "credit_card"],
  ["The 19-digit UnionPay card is 6205500000000000004.", "credit_card"],
  ["My old 13-digit Visa was 4222222222222.", "credit_card"],
  // a security code is card data whatever the number beside it (this one fails Luhn)
  ["Charge 4111 1111 1111 1112, exp 11/28, CVV 417.", "credit_card"],
  ["cvc: 0382", "credit_card"],
  ["The card security code is 552, use it today", "credit_card"],
];
for (const [text, kind] of lessCommonPii) {
  test(`pii (ITIN, passport, licence, card length): ${JSON.stringify(text)} is ${kind}`, (t) => {
    const v = piiGuard(text);
    t.is(v.result, "block", JSON.stringify(v));
    t.true(
      v.matches.some((m) => m.kind === kind),
      JSON.stringify(v.matches),
    );
  });
}
for (const text of [
  "Is DE88 3704 0044 0532 0130 00 a valid IBAN? The bank rejected it.",
  "The IBAN GB28 NWBK 6016 1331 9268 19 in the letter looks wrong.",
  "Passport photos must be 2 by 2 inches.",
  "My driver's license expired last month; what documents do I need?",
  "Order 912-45-3456 shipped.",
  "Where is the CVV on a card? Is it 3 or 4 digits?",
  "The CVV2 check failed on 12 orders today.",
]) {
  test(`pii (look-alike): ${JSON.stringify(text)} passes`, (t) => {
    const v = piiGuard(text);
    t.is(v.result, "pass", JSON.stringify(v));
  });
}

test("identifierView: an address written whole is not joined to the short words after it", (t) => {
  // detectPii would hide such a join (its hit overlaps the address found as written), so the view is asked
  t.is(identifierView("write to jane.doe@example.com or us"), null);
  t.is(identifierView("write to jane.doe@example . com or us")?.text, "write to jane.doe@example.com or us");
});
