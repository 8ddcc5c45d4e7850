"""The metadata object types of 1C:Enterprise and every spelling of them: folder names, Russian
and English singulars, Russian plurals; what ``Chunk.owner`` and ``Chunk.object_type`` use and
what filters and qualified queries accept (:func:`normalize_object_type`)."""

from __future__ import annotations

import unicodedata

#: Designer/EDT folder name -> (Russian singular type, English singular type).
#: The Russian name is what ``Chunk.owner`` / ``Chunk.object_type`` use; the English one is
#: the class name of the XML element (``<Catalog>``, ``<mdclass:Catalog>``) and of
#: references such as ``Catalog.Пользователи`` in ``Configuration.xml``. Names follow the
#: 1C:Enterprise 8.3 metadata object model (``Метаданные.<Коллекция>``).
OBJECT_TYPES: dict[str, tuple[str, str]] = {
    "CommonModules": ("ОбщийМодуль", "CommonModule"),
    "Catalogs": ("Справочник", "Catalog"),
    "Documents": ("Документ", "Document"),
    "DocumentJournals": ("ЖурналДокументов", "DocumentJournal"),
    "DocumentNumerators": ("НумераторДокументов", "DocumentNumerator"),
    "Sequences": ("Последовательность", "Sequence"),
    "Enums": ("Перечисление", "Enum"),
    "Constants": ("Константа", "Constant"),
    "Reports": ("Отчет", "Report"),
    "DataProcessors": ("Обработка", "DataProcessor"),
    "InformationRegisters": ("РегистрСведений", "InformationRegister"),
    "AccumulationRegisters": ("РегистрНакопления", "AccumulationRegister"),
    "AccountingRegisters": ("РегистрБухгалтерии", "AccountingRegister"),
    "CalculationRegisters": ("РегистрРасчета", "CalculationRegister"),
    "ChartsOfCharacteristicTypes": ("ПланВидовХарактеристик", "ChartOfCharacteristicTypes"),
    "ChartsOfAccounts": ("ПланСчетов", "ChartOfAccounts"),
    "ChartsOfCalculationTypes": ("ПланВидовРасчета", "ChartOfCalculationTypes"),
    "BusinessProcesses": ("БизнесПроцесс", "BusinessProcess"),
    "Tasks": ("Задача", "Task"),
    "ExchangePlans": ("ПланОбмена", "ExchangePlan"),
    "CommonForms": ("ОбщаяФорма", "CommonForm"),
    "CommonCommands": ("ОбщаяКоманда", "CommonCommand"),
    "CommonTemplates": ("ОбщийМакет", "CommonTemplate"),
    "CommonPictures": ("ОбщаяКартинка", "CommonPicture"),
    "CommonAttributes": ("ОбщийРеквизит", "CommonAttribute"),
    "EventSubscriptions": ("ПодпискаНаСобытие", "EventSubscription"),
    "ScheduledJobs": ("РегламентноеЗадание", "ScheduledJob"),
    "SessionParameters": ("ПараметрСеанса", "SessionParameter"),
    "FunctionalOptions": ("ФункциональнаяОпция", "FunctionalOption"),
    "FunctionalOptionsParameters": ("ПараметрФункциональныхОпций", "FunctionalOptionsParameter"),
    "DefinedTypes": ("ОпределяемыйТип", "DefinedType"),
    "SettingsStorages": ("ХранилищеНастроек", "SettingsStorage"),
    "FilterCriteria": ("КритерийОтбора", "FilterCriterion"),
    "HTTPServices": ("HTTPСервис", "HTTPService"),
    "WebServices": ("WebСервис", "WebService"),
    "WSReferences": ("WSСсылка", "WSReference"),
    "XDTOPackages": ("ПакетXDTO", "XDTOPackage"),
    "Subsystems": ("Подсистема", "Subsystem"),
    "Roles": ("Роль", "Role"),
    "Languages": ("Язык", "Language"),
    "StyleItems": ("ЭлементСтиля", "StyleItem"),
    "Styles": ("Стиль", "Style"),
    "CommandGroups": ("ГруппаКоманд", "CommandGroup"),
    "Interfaces": ("Интерфейс", "Interface"),
    "ExternalDataSources": ("ВнешнийИсточникДанных", "ExternalDataSource"),
    "IntegrationServices": ("СервисИнтеграции", "IntegrationService"),
    "Bots": ("Бот", "Bot"),
    "PaletteColors": ("ЦветПалитры", "PaletteColor"),
}

#: Russian plural collection names (``Метаданные.Справочники``, ``Справочники.X`` in code),
#: accepted as aliases by :func:`normalize_object_type`.
_RU_PLURALS: dict[str, str] = {
    "ОбщиеМодули": "CommonModules",
    "Справочники": "Catalogs",
    "Документы": "Documents",
    "ЖурналыДокументов": "DocumentJournals",
    "НумераторыДокументов": "DocumentNumerators",
    "Последовательности": "Sequences",
    "Перечисления": "Enums",
    "Константы": "Constants",
    "Отчеты": "Reports",
    "Обработки": "DataProcessors",
    "РегистрыСведений": "InformationRegisters",
    "РегистрыНакопления": "AccumulationRegisters",
    "РегистрыБухгалтерии": "AccountingRegisters",
    "РегистрыРасчета": "CalculationRegisters",
    "ПланыВидовХарактеристик": "ChartsOfCharacteristicTypes",
    "ПланыСчетов": "ChartsOfAccounts",
    "ПланыВидовРасчета": "ChartsOfCalculationTypes",
    "БизнесПроцессы": "BusinessProcesses",
    "Задачи": "Tasks",
    "ПланыОбмена": "ExchangePlans",
    "ОбщиеФормы": "CommonForms",
    "ОбщиеКоманды": "CommonCommands",
    "ОбщиеМакеты": "CommonTemplates",
    "ОбщиеКартинки": "CommonPictures",
    "ОбщиеРеквизиты": "CommonAttributes",
    "ПодпискиНаСобытия": "EventSubscriptions",
    "РегламентныеЗадания": "ScheduledJobs",
    "ПараметрыСеанса": "SessionParameters",
    "ФункциональныеОпции": "FunctionalOptions",
    "ПараметрыФункциональныхОпций": "FunctionalOptionsParameters",
    "ОпределяемыеТипы": "DefinedTypes",
    "ХранилищаНастроек": "SettingsStorages",
    "КритерииОтбора": "FilterCriteria",
    "HTTPСервисы": "HTTPServices",
    "WebСервисы": "WebServices",
    "WSСсылки": "WSReferences",
    "ПакетыXDTO": "XDTOPackages",
    "Подсистемы": "Subsystems",
    "Роли": "Roles",
    "Языки": "Languages",
    "ЭлементыСтиля": "StyleItems",
    "Стили": "Styles",
    "ГруппыКоманд": "CommandGroups",
    "Интерфейсы": "Interfaces",
    "ВнешниеИсточникиДанных": "ExternalDataSources",
    "СервисыИнтеграции": "IntegrationServices",
    "Боты": "Bots",
    "ЦветаПалитры": "PaletteColors",
}

#: Pseudo type of the configuration's own modules (``Ext/SessionModule.bsl``).
CONFIGURATION = "Конфигурация"

#: Sub-object folders inside an object folder -> the Russian word used in ``owner``
#: (``Справочник.X.Форма.F``, ``Справочник.X.Команда.C``; 1C full-name notation).
SUB_FOLDERS: dict[str, str] = {
    "Forms": "Форма",
    "Commands": "Команда",
    "Recalculations": "Перерасчет",
    "Tables": "Таблица",
    "Cubes": "Куб",
    "Subsystems": "Подсистема",
}

_RU_BY_EN = {en: ru for ru, en in OBJECT_TYPES.values()}
_EN_BY_RU = {ru: en for ru, en in OBJECT_TYPES.values()}
_FOLDER_BY_EN = {en: folder for folder, (_ru, en) in OBJECT_TYPES.items()}
_FOLDER_BY_RU = {ru: folder for folder, (ru, _en) in OBJECT_TYPES.items()}
_YO = str.maketrans({"ё": "е", "Ё": "Е"})


def _key(s: str) -> str:
    return unicodedata.normalize("NFC", s).strip().translate(_YO).casefold()


def object_type_aliases() -> dict[str, str]:
    """All accepted spellings of an object type, folded, -> the Russian singular type.

    Keys are ``str.casefold()``-ed, NFC, with ``ё`` folded to ``е``: the Russian singular
    (``справочник``), the English singular (``catalog``), the folder / English plural
    (``catalogs``) and the Russian plural (``справочники``); plus ``конфигурация`` /
    ``configuration`` for the configuration modules. Built fresh on each call (cheap, ~200
    entries); :func:`normalize_object_type` uses a cached copy.
    """
    out: dict[str, str] = {}
    for folder, (ru, en) in OBJECT_TYPES.items():
        for alias in (folder, ru, en):
            out[_key(alias)] = ru
    for plural, folder in _RU_PLURALS.items():
        out[_key(plural)] = OBJECT_TYPES[folder][0]
    out[_key(CONFIGURATION)] = CONFIGURATION
    out[_key("Configuration")] = CONFIGURATION
    return out


_ALIASES = object_type_aliases()


def normalize_object_type(s: str) -> str | None:
    """Map any spelling of an object type to the Russian singular, or ``None`` if unknown.

    Case-insensitive, ``ё``-insensitive: ``"Catalog"``, ``"catalogs"``, ``"Справочник"``,
    ``"Справочники"`` -> ``"Справочник"``; ``"Configuration"`` -> ``"Конфигурация"``.
    Used by search filters and by qualified queries like ``Catalog.Users``.
    """
    if not s:
        return None
    return _ALIASES.get(_key(s))


def object_type_list() -> str:
    """The metadata object types for an error message: ``Catalog (Справочник), Document
    (Документ), ...`` in :data:`OBJECT_TYPES` order, then ``Configuration (Конфигурация)``;
    folder names and plurals are accepted too (:func:`normalize_object_type`)."""
    items = [f"{en} ({ru})" for ru, en in OBJECT_TYPES.values()] + [f"Configuration ({CONFIGURATION})"]
    return ", ".join(items) + "; also the folder names (Catalogs) and Russian plurals"


def english_type(ru_type: str) -> str | None:
    """English singular type for a Russian singular one (``Справочник`` -> ``Catalog``),
    ``Configuration`` for ``Конфигурация``; ``None`` if unknown."""
    if ru_type == CONFIGURATION:
        return "Configuration"
    return _EN_BY_RU.get(ru_type)


def type_folder(type_name: str) -> str | None:
    """Folder name (``Catalogs``) for a Russian or English singular type, or ``None``."""
    return _FOLDER_BY_EN.get(type_name) or _FOLDER_BY_RU.get(type_name)
