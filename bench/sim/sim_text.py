"""llmsim's deterministic text: realistic-looking English words from a
seed, for prompts (bench/workload) and replies."""


import hashlib
from sim_template import BYTES_PER_TOKEN


# ---------------------------------------------------------------------------
# Deterministic text: realistic-looking English words from a seed.
#
# Word choice comes from BLAKE2b in counter mode (stable across Python
# versions and platforms), never from the random module.  The workload
# generator uses the same function for prompts and, through reply_text(),
# to write the assistant turns a client would send back.

VOCAB = (
    "the of and to a in is that for it as was with be by on not he this are "
    "or his from at which but have an they you were her she there one all "
    "we their been has would when if will more no out so said what up its "
    "about into than them can only other new some could time these two may "
    "then do first any my now such like our over man me even most made "
    "after also did many before must through back years where much your "
    "way well down should because each just those people how too little "
    "state good very make world still own see men work long get here "
    "between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take "
    "three states himself few house use during without again place around "
    "however home small found thought went say part once general high upon "
    "school every does got united left number course war until always away "
    "something fact though water less public put think almost hand enough "
    "far took head yet government system better set told nothing night end "
    "why called eyes find going look asked later knew point next program "
    "city business give group toward young days let room president side "
    "social present given several order national possible rather second "
    "face per among form important often things looked early white case "
    "john become large big need four within felt along children saw best "
    "church ever least power development light thing seemed family "
    "interest want members mind country area others done turned although "
    "open problem sense service certain kind began thus help means "
    "perhaps whole matter idea above question feel data report policy "
    "market value level model price answer customer invoice account support "
    "request update issue review team project design result process "
    "network server client query cache memory storage version release "
    "document section message reply summary history detail context "
    "language library function method record table field source target "
    "travel weather garden kitchen music river mountain street window "
    "morning evening winter summer letter story friend doctor teacher "
    "student meeting office lesson simple clear quick careful useful "
    "please explain describe compare suggest consider include provide "
    "follow check write read plan build test measure improve reduce"
).split()

_NV = len(VOCAB)


def words_text(key, nbytes):
    """Exactly nbytes of ASCII text: words, commas, sentences, paragraphs.

    key (str or bytes) selects the text; the same key always gives the same
    text (a shorter text is a prefix of a longer one but for its last
    character, which is never a space).
    """
    if nbytes <= 0:
        return ""
    if isinstance(key, str):
        key = key.encode()
    vocab = VOCAB
    out = []
    total = 0
    ctr = 0
    cap = True
    blake = hashlib.blake2b
    while total < nbytes:
        d = blake(key + ctr.to_bytes(8, "little"), digest_size=63).digest()
        ctr += 1
        for i in range(0, 63, 3):
            v = d[i] | (d[i + 1] << 8)
            w = vocab[(v * v * _NV) >> 32]       # skewed to common words
            if cap:
                w = w[0].upper() + w[1:]
                cap = False
            p = d[i + 2]
            if p < 16:                  # ~1 word in 16 ends a sentence
                w += ". " if p else ".\n"  # 1 in 256: a paragraph
                cap = True
            elif p < 24:
                w += ", "
            else:
                w += " "
            out.append(w)
            total += len(w)
    text = "".join(out)[:nbytes]
    if text[-1] in " \n":
        text = text[:-1] + "."
    return text


def reply_text(seed, n_tokens):
    """The simulator's completion for a request with this seed: 4n bytes."""
    return words_text(b"llmsim-reply:%d" % seed, BYTES_PER_TOKEN * n_tokens)
