"""Word lists of the rule extractor (lower case): words that are not names when capitalised at
the start of a sentence, cues that say what kind of thing a name is, and a small gazetteer of
places. Lists, not a model: extending one is a one-line change with a test."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Capitalised at the start of a sentence these are ordinary words, not names: function words,
#: pronouns, interjections and the adjectives, adverbs and verbs a sentence (a chat turn above
#: all) starts with.
SENTENCE_STARTERS = _words("""
    a an the this that these those there here it its it's we i i'm i've i'd i'll our ours my me us you
    you're you've your yours he she they them their theirs his her hers him one some any all each every
    both either neither no none not never also and but or so yet nor for if then than when whenever
    while where wherever why how what which who whom whose whoever as at by in on of off to from with
    without into onto over under after before since until till during about above below across along
    among around behind beside besides between beyond despite except inside outside near per through
    throughout toward towards upon via within against like unlike unless because although though
    whereas whether once always usually often sometimes rarely seldom generally typically currently
    recently lately now today tomorrow yesterday tonight soon later earlier already still just only
    even ever again finally first second third next last however therefore thus hence meanwhile
    moreover furthermore otherwise instead anyway actually basically apparently obviously clearly
    unfortunately fortunately hopefully ideally overall initially originally previously eventually
    perhaps maybe probably certainly definitely absolutely mostly mainly nearly almost approximately
    roughly exactly is are was were be been being am do does did done have has had having will would
    shall should can could may might must need needs let lets let's yes yeah yep yup no nope nah ok okay
    please thanks thank note notes remember important update updated reminder tip warning
    version release revision number total use using make ensure keep check add remove set run call send
    ask tell see go get try avoid prefer prefers everyone everybody everything someone somebody
    something anyone anybody anything nobody nothing new old other another same such many much more
    most few several less least own main primary current previous default half lots plenty sure well
    good great best better dear hi hello hey hiya howdy wow whoa oh ooh ah aw aww awesome amazing cool
    nice lovely sweet beautiful wonderful fantastic fabulous brilliant incredible impressive
    interesting exciting excited glad happy sad sorry congrats congratulations cheers welcome bye
    goodbye haha hahaha lol hmm um uh ugh gosh omg totally really truly seriously honestly literally
    sounds sound looks look seems seem feels feel felt love loved loving like liked hate hated want
    wanted wish hope hoped guess think thought know knew knowing bet agree agreed true right exactly
    wait hold listen hang come came going gone went got getting took take taking made making saw
    seeing said saying told telling gave give giving tried trying started starting finished finishing
    been doing did done had just lately anyway speaking talking thinking wondering curious
    definitely surely indeed alright fine perfect absolutely totally glad proud thankful grateful
    keep keeping kept stay staying stayed enjoy enjoyed enjoying enjoys learned learning learn
    working worked work works living lived live lives moving moved move playing played play plays
    reading read reads writing wrote write writes painting painted paint paints visiting visited
    visit visits buying bought buy spending spent spend watching watched watch attending attended
    attend joining joined join helping helped help having has hasn't haven't isn't aren't wasn't
    weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't it'll that's there's here's
    what's who's how's where's when's why's let's things thing stuff life time times day days week
    weeks year years month months people person family friends friend kids kid children child mom dad
    parents husband wife son daughter brother sister guys folks everyone anyway besides plus also
    although despite given based according regarding following including considering concerning
    via per each every whatever whichever however wherever whoever altogether together regardless
    patients patient results result methods method conclusions conclusion background objective
    objectives design setting participants interventions measurements findings data analysis
    studies study we here our these this using compared among despite although increased decreased
    high low higher lower significant significantly large small two three four five six seven eight
    nine ten eleven twelve twenty thirty forty fifty hundred hundreds thousand thousands million dozens
    several numerous multiple various
    """)

#: Endings of ordinary words: a capitalised word ending so is a name only with other evidence
#: (NAME_SUFFIXES_ANYWHERE wherever it stands, COMMON_SUFFIXES_INITIAL at a sentence's start).
COMMON_SUFFIXES_ANYWHERE = ("tion", "sion", "ment", "ness", "ism", "ous", "ful", "less", "able", "ible",
                            "ical", "ology", "osis", "itis", "emia", "ities")
COMMON_SUFFIXES_INITIAL = ("ing", "ly", "ed", "ic", "al", "ent", "ant", "ary", "ory", "ids", "ers", "ive",
                           "ity", "ance", "ence", "ies", "est", "ish")

#: Words that join the parts of one name ("Bank of America", "Johnson & Johnson", "van Gogh");
#: not "and": "Marco and Ana" are two people far more often than one firm ("Procter & Gamble").
NAME_CONNECTORS = _words("of de del della da di du la le van von der den al bin y &")

#: Languages and nationalities: alone, an adjective or a language, not an entity ("speaks
#: Portuguese", "a Brazilian band"); inside a longer name they stay ("American Airlines").
NATIONALITIES = _words("""
    english french german spanish portuguese italian dutch flemish russian chinese japanese korean
    arabic hindi bengali urdu punjabi tamil telugu marathi gujarati turkish greek polish swedish
    norwegian danish finnish icelandic czech slovak slovenian hungarian romanian bulgarian serbian
    croatian bosnian ukrainian belarusian estonian latvian lithuanian hebrew persian farsi thai
    vietnamese indonesian malay filipino tagalog swahili amharic irish scottish welsh british
    american canadian mexican brazilian argentine argentinian chilean colombian peruvian venezuelan
    cuban australian indian pakistani bangladeshi nepali egyptian moroccan nigerian kenyan
    ethiopian ghanaian african european asian latino latina hispanic caribbean nordic scandinavian
    catalan basque galician belgian swiss austrian israeli iranian iraqi syrian lebanese saudi
    emirati afghan taiwanese mandarin cantonese sanskrit esperanto
    """)

#: Verbs of a plural subject: a capitalised plural opening a sentence before one is an ordinary
#: noun ("Invoices are sent monthly", "Dogs were not allowed"), not a name.
PLURAL_VERBS = _words("are were have do aren't weren't haven't don't")

#: The word before a person's name.
HONORIFICS = _words("mr mrs ms mx dr prof sir madam miss mister doctor professor aunt uncle grandma grandpa")

#: The last word of an organisation's name.
ORGANIZATION_SUFFIXES = _words("""
    inc inc. corp corp. corporation co co. company companies ltd ltd. llc plc gmbh ag sa group
    university college school academy institute institution foundation association society
    agency department ministry council committee commission bank hospital clinic center centre
    club team league union party church museum library lab labs laboratory laboratories studio
    studios records press network networks systems technologies solutions services partners
    consulting holdings industries airlines airways office
    """)

#: The last word of a place's name.
PLACE_SUFFIXES = _words("""
    city town village county state province street st avenue ave road rd boulevard blvd lane way
    square park lake river mountain mountains mount hill hills valley beach bay island islands coast
    desert forest canyon falls sea ocean harbor harbour airport station bridge district region
    """)

#: Words before a place (when the name is not known as anything else).
PLACE_CUES = _words("in at from to near visited visit visiting moved around across toward towards into")

#: Words after which a lone capitalised word is a person.
PERSON_CUES = _words("""
    with met meet meeting told tell asked ask called call named friend friends mentor colleague
    colleagues boss partner husband wife son daughter brother sister mother father mom dad cousin
    niece nephew neighbor neighbour by thanks thank hi hey dear
    """)

#: Months and their abbreviations (-> month number), weekdays.
MONTHS = {"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
          "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
          "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
          "oct": 10, "nov": 11, "dec": 12}
WEEKDAYS = _words("monday tuesday wednesday thursday friday saturday sunday")

#: Places known by name: countries, US states and large cities (a lone word needs no cue).
PLACES = _words("""
    afghanistan albania algeria argentina armenia australia austria azerbaijan bahamas bangladesh
    belarus belgium bolivia bosnia brazil bulgaria cambodia cameroon canada chile china colombia
    croatia cuba cyprus czechia denmark ecuador egypt england estonia ethiopia finland france georgia
    germany ghana greece guatemala haiti honduras hungary iceland india indonesia iran iraq ireland
    israel italy jamaica japan jordan kazakhstan kenya korea kosovo kuwait laos latvia lebanon libya
    lithuania luxembourg madagascar malaysia mali malta mexico moldova mongolia montenegro morocco
    mozambique myanmar nepal netherlands nicaragua nigeria norway pakistan panama paraguay peru
    philippines poland portugal qatar romania russia rwanda scotland senegal serbia singapore
    slovakia slovenia somalia spain sudan sweden switzerland syria taiwan tanzania thailand tunisia
    turkey uganda ukraine uruguay uzbekistan venezuela vietnam wales yemen zambia zimbabwe europe asia
    africa america americas antarctica oceania usa us uk uae eu
    alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii idaho
    illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota
    mississippi missouri montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas
    utah vermont virginia washington wisconsin wyoming
    london paris berlin madrid rome lisbon porto barcelona amsterdam brussels vienna prague warsaw
    budapest dublin edinburgh glasgow manchester liverpool oslo stockholm copenhagen helsinki athens
    istanbul moscow kyiv kiev cairo lagos nairobi johannesburg tokyo kyoto osaka seoul beijing shanghai
    hong singapore bangkok delhi mumbai bangalore sydney melbourne auckland toronto vancouver montreal
    boston chicago seattle portland denver austin dallas houston phoenix atlanta miami orlando
    philadelphia detroit nashville brooklyn manhattan la nyc sf hawaii vegas zurich geneva munich
    hamburg frankfurt milan naples venice florence marseille lyon nice
    """)

#: Upper-case words that are not organisations.
ACRONYM_STOPWORDS = _words("""
    ok am pm fyi tbd todo nb ps asap aka eg ie omg lol btw imo tv id i ii iii iv vs diy faq eta rsvp
    api apis dns gb mb kb tb gpu cpu ram ssd hdd http https url urls sql json xml html css pdf vpn ip tcp
    udp ssh tls ssl ci cd ui ux os pr qa hr ceo cto cfo coo vp dna rna phd md bbq dj usb lan wifi sms
    """)

#: Verbs after a statement's subject: a capitalised first word followed by one is a name even
#: when it ends like an ordinary word ("Mohammed prefers", "Rafael speaks").
SUBJECT_VERBS = _words("""
    is was has had says said prefers preferred likes liked loves loved wants wanted needs lives lived
    works worked speaks spoke leads led runs ran owns owned uses used joined moved went told asked
    thinks thought knows knew plays played writes wrote manages managed teaches taught studies
    """)
